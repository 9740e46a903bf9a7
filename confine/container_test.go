package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetectContainer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		env     map[string]string
		runtime string
	}{
		{"none", map[string]string{"proc/1/cgroup": "0::/init.scope\n"}, nil, ""},
		{"podman", map[string]string{"run/.containerenv": "engine=\"podman-4.3.1\"\nrootless=0\n"}, nil, "podman"},
		{"docker", map[string]string{".dockerenv": ""}, nil, "docker"},
		{"kubernetes env", map[string]string{".dockerenv": ""}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "kubernetes"},
		{"kubernetes secrets", map[string]string{"var/run/secrets/kubernetes.io/serviceaccount/token": "x"}, nil, "kubernetes"},
		{"lxc variable", nil, map[string]string{"container": "lxc"}, "lxc"},
		{"pid 1 variable", map[string]string{"proc/1/environ": "PATH=/bin\x00container=systemd-nspawn\x00"}, nil, "systemd-nspawn"},
		{"unknown variable", nil, map[string]string{"container": "oci"}, "container"},
		{"cgroup path", map[string]string{"proc/1/cgroup": "0::/kubepods/burstable/pod1/abc\n"}, nil, "kubernetes"},
		{"libpod cgroup", map[string]string{"proc/1/cgroup": "0::/machine.slice/libpod-abc.scope\n"}, nil, "podman"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				must := func(err error) {
					if err != nil {
						t.Fatal(err)
					}
				}
				must(os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
				must(os.WriteFile(filepath.Join(root, p), []byte(c), 0o644))
			}
			got := detectContainer(root, func(k string) string { return tc.env[k] })
			if got.Runtime != tc.runtime || (tc.runtime != "" && got.Evidence == "") {
				t.Errorf("detected %+v, want runtime %q with evidence", got, tc.runtime)
			}
		})
	}
}

func TestContainerFix(t *testing.T) {
	if (Container{}).Fix(LayerUserNS, false) != "" {
		t.Error("no container: a fix was named")
	}
	pod := Container{Runtime: "kubernetes"}
	for _, l := range []string{LayerUserNS, LayerMountNS, LayerSeccomp} {
		if f := pod.Fix(l, false); !strings.Contains(f, "localhostProfile: b10x-harness.json") {
			t.Errorf("kubernetes %s: %q", l, f)
		}
	}
	if f := pod.Fix(LayerLandlockChild, false); f != "" {
		t.Errorf("a container cannot grant Landlock, yet: %q", f)
	}
	if f := pod.Fix(LayerLandlockChild, true); f == "" {
		t.Error("Landlock blocked by the runtime's policy: no fix named")
	}
	if f := (Container{Runtime: "podman"}).Fix(LayerUserNS, false); !strings.Contains(f, "podman run --security-opt seccomp=deploy/seccomp/b10x-harness.json") {
		t.Errorf("podman: %q", f)
	}
	if f := (Container{Runtime: "docker"}).Fix(LayerPidsLimit, false); !strings.Contains(f, "--cgroupns=private") {
		t.Errorf("docker cgroup: %q", f)
	}
}
