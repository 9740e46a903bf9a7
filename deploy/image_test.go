package deploy

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// The image is built without a registry and without RUN steps (they fail
// where podman's OCI runtime refuses the host's cgroups): FROM scratch, and
// only COPY of what deploy/build-image.sh laid out.
func TestContainerfileNeedsNoRegistryNorRun(t *testing.T) {
	b, err := os.ReadFile("../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word := strings.ToUpper(strings.Fields(line)[0])
		switch word {
		case "FROM":
			froms++
			if line != "FROM scratch" {
				t.Errorf("%q: the image must start FROM scratch (no registry)", line)
			}
		case "RUN", "ADD", "ONBUILD":
			t.Errorf("%q: no %s steps (the root file system is laid out before the build)", line, word)
		case "COPY":
			if strings.Contains(line, "--from") {
				t.Errorf("%q: COPY --from pulls another image", line)
			}
		case "ENTRYPOINT":
			if !strings.Contains(line, `"`+harnessBin+`"`) {
				t.Errorf("%q: the entry point is not %s", line, harnessBin)
			}
		}
	}
	if froms != 1 {
		t.Errorf("%d FROM lines, want 1", froms)
	}
}
