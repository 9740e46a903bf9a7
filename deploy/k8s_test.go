package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/session"
)

// The manifests are YAML written in JSON's syntax: full-line # comments,
// documents separated by "---" lines, and each document a JSON object.

type obj = map[string]any

func parseManifest(b []byte) ([]obj, error) {
	var docs []obj
	var cur bytes.Buffer
	flush := func() error {
		if strings.TrimSpace(cur.String()) == "" {
			cur.Reset()
			return nil
		}
		d := json.NewDecoder(bytes.NewReader(cur.Bytes()))
		d.UseNumber()
		var o obj
		if err := d.Decode(&o); err != nil {
			return fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		if d.More() {
			return fmt.Errorf("document %d: more than one JSON value", len(docs)+1)
		}
		docs = append(docs, o)
		cur.Reset()
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if t == "---" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(t, "#") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no document")
	}
	return docs, nil
}

// path follows keys (string) and indexes (int) through o.
func path(o any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := o.(obj)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			a, ok := o.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			o = a[k]
		}
	}
	return o
}

func str(o any, keys ...any) string {
	s, _ := path(o, keys...).(string)
	return s
}

func list(o any, keys ...any) []any {
	a, _ := path(o, keys...).([]any)
	return a
}

func num(o any, keys ...any) (int64, bool) {
	n, ok := path(o, keys...).(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

const (
	profileName = "b10x-harness.json"
	image       = "localhost/b10x-harness:dev"
	harnessBin  = "/usr/local/bin/b10x-harness"
)

// checkSeccomp requires a Localhost profile naming the shipped file.
func checkSeccomp(where string, sp any) []string {
	if sp == nil {
		return nil
	}
	var errs []string
	if str(sp, "type") != "Localhost" {
		errs = append(errs, where+": seccompProfile.type is not Localhost")
	}
	if lp := str(sp, "localhostProfile"); lp != profileName {
		errs = append(errs, fmt.Sprintf("%s: localhostProfile %q is not the shipped %q", where, lp, profileName))
	}
	return errs
}

// checkPodSpec checks what every pod that runs the harness must have.
// It returns one message per problem.
func checkPodSpec(where string, spec any) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, where+": "+fmt.Sprintf(f, a...)) }
	if spec == nil {
		return []string{where + ": no pod spec"}
	}
	if path(spec, "securityContext", "seccompProfile") == nil {
		bad("the pod has no seccompProfile")
	}
	errs = append(errs, checkSeccomp(where+" pod", path(spec, "securityContext", "seccompProfile"))...)
	if path(spec, "securityContext", "runAsNonRoot") != true {
		bad("runAsNonRoot is not true (a root harness without CAP_SYS_ADMIN cannot idmap its workspace: run is never published)")
	}
	if uid, ok := num(spec, "securityContext", "runAsUser"); !ok || uid == 0 {
		bad("runAsUser is missing or 0")
	}
	volumes := map[string]bool{}
	for _, v := range list(spec, "volumes") {
		volumes[str(v, "name")] = true
	}
	unmasked := false
	inits := list(spec, "initContainers")
	mains := list(spec, "containers")
	if len(mains) == 0 {
		bad("no containers")
	}
	for i, c := range append(append([]any{}, inits...), mains...) {
		isInit := i < len(inits)
		cw := fmt.Sprintf("container %d (%s)", i, str(c, "name"))
		sc := path(c, "securityContext")
		if sc == nil {
			bad("%s has no securityContext", cw)
			continue
		}
		if path(sc, "privileged") == true {
			bad("%s is privileged", cw)
		}
		if path(sc, "allowPrivilegeEscalation") != false {
			bad("%s: allowPrivilegeEscalation is not false", cw)
		}
		if !slices.Contains(list(sc, "capabilities", "drop"), any("ALL")) {
			bad("%s does not drop ALL capabilities", cw)
		}
		if add := list(sc, "capabilities", "add"); len(add) > 0 {
			bad("%s adds capabilities %v", cw, add)
		}
		errs = append(errs, checkSeccomp(where+" "+cw, path(sc, "seccompProfile"))...)
		for _, kind := range []string{"requests", "limits"} {
			for _, res := range []string{"cpu", "memory"} {
				if str(c, "resources", kind, res) == "" {
					bad("%s has no resources.%s.%s", cw, kind, res)
				}
			}
		}
		for _, m := range list(c, "volumeMounts") {
			if !volumes[str(m, "name")] {
				bad("%s mounts volume %q, which the pod does not define", cw, str(m, "name"))
			}
		}
		if str(sc, "procMount") == "Unmasked" {
			unmasked = true
		}
		// The harness may run in any main container (directly, or as
		// the wrapper of a runner's steps): each needs a /proc that its
		// run calls can mount anew.
		if !isInit && str(sc, "procMount") != "Unmasked" {
			bad("%s may run the harness but has no procMount: Unmasked: run calls cannot mount their /proc", cw)
		}
	}
	if unmasked && path(spec, "hostUsers") != false {
		bad("procMount: Unmasked without hostUsers: false")
	}
	return errs
}

func readManifest(t *testing.T, name string) []obj {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := parseManifest(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return docs
}

func TestEveryManifestParses(t *testing.T) {
	files, err := filepath.Glob("k8s/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") {
			t.Errorf("%s: manifests end in .yaml", f)
			continue
		}
		docs := readManifest(t, filepath.Base(f))
		for i, d := range docs {
			if str(d, "kind") != "" && (str(d, "apiVersion") == "" || str(d, "metadata", "name") == "") {
				t.Errorf("%s document %d: a %s needs apiVersion and metadata.name", f, i+1, str(d, "kind"))
			}
		}
		b, _ := os.ReadFile(f)
		// Every image the manifests name is the one make image builds, or
		// the runner image of Actions Runner Controller.
		for _, m := range regexp.MustCompile(`"image": *"([^"]+)"`).FindAllSubmatch(b, -1) {
			if img := string(m[1]); img != image && !strings.HasPrefix(img, "ghcr.io/actions/actions-runner:") {
				t.Errorf("%s: image %q is neither %q nor the runner image", f, img, image)
			}
		}
	}
}

func TestProfileNamedIsShipped(t *testing.T) {
	if _, err := os.Stat(filepath.Join("seccomp", profileName)); err != nil {
		t.Fatalf("the manifests name %s, which deploy/seccomp does not ship: %v", profileName, err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mk, []byte("IMAGE ?= "+image+"\n")) {
		t.Fatalf("the Makefile's IMAGE is not %s, the image the manifests run", image)
	}
	bi, err := os.ReadFile("build-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bi, []byte(`"$r`+harnessBin+`"`)) {
		t.Fatalf("build-image.sh does not install the harness at %s, where the manifests run it", harnessBin)
	}
}

func evalJob(t *testing.T) (cm, job obj) {
	for _, d := range readManifest(t, "eval-job.yaml") {
		switch str(d, "kind") {
		case "ConfigMap":
			cm = d
		case "Job":
			job = d
		}
	}
	if cm == nil || job == nil {
		t.Fatal("eval-job.yaml: want a ConfigMap and a Job")
	}
	return cm, job
}

func checkEvalJob(cm, job obj, claims map[string]bool) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, "eval job: "+fmt.Sprintf(f, a...)) }
	if str(job, "apiVersion") != "batch/v1" || str(job, "spec", "completionMode") != "Indexed" {
		bad("not a batch/v1 Job with completionMode Indexed")
	}
	n, ok := num(job, "spec", "completions")
	if !ok || n < 1 {
		bad("completions missing")
	}
	if p, ok := num(job, "spec", "parallelism"); !ok || p < 1 {
		bad("parallelism missing")
	}
	spec := path(job, "spec", "template", "spec")
	errs = append(errs, checkPodSpec("eval job", spec)...)
	for i := int64(0); i < n; i++ {
		if str(cm, "data", fmt.Sprintf("task-%d.txt", i)) == "" {
			bad("the ConfigMap has no task-%d.txt for index %d", i, i)
		}
	}
	c := path(spec, "containers", 0)
	cmd := strings.Join(func() []string {
		var s []string
		for _, a := range append(list(c, "command"), list(c, "args")...) {
			s = append(s, fmt.Sprint(a))
		}
		return s
	}(), " ")
	for _, want := range []string{"b10x-harness run", "--policy /tasks/policy.toml", "--record \"/records/", "--json", "$JOB_COMPLETION_INDEX"} {
		if !strings.Contains(cmd, want) {
			bad("the command lacks %q", want)
		}
	}
	if strings.Contains(cmd, "--confine") {
		bad("the command sets --confine, which overrides the policy file's")
	}
	// The policy the pods run: parsed as the harness parses it, strict,
	// with the pod's own limits standing in for per-call leaves.
	pf, err := session.ParseFile("policy.toml", []byte(str(cm, "data", "policy.toml")))
	if err != nil {
		bad("policy.toml: %v", err)
	} else {
		pol := session.Defaults()
		if err := pf.Apply(&pol); err != nil {
			bad("policy.toml: %v", err)
		}
		if pol.Confine.String() != "strict" || pol.Run.LimitsFrom != "enclosing" {
			bad("policy.toml: confine %s, limits_from %q; want strict with the pod's limits (enclosing)", pol.Confine, pol.Run.LimitsFrom)
		}
	}
	lim := path(c, "resources", "limits")
	for _, k := range []string{"cpu", "memory"} {
		if str(lim, k) == "" {
			bad("resources.limits.%s missing: strict with limits_from enclosing needs the pod's limits", k)
		}
	}
	mounted := false
	for _, m := range list(c, "volumeMounts") {
		if str(m, "mountPath") == "/records" && path(m, "readOnly") != true {
			mounted = true
		}
	}
	if !mounted {
		bad("nothing writable is mounted at /records")
	}
	for _, v := range list(spec, "volumes") {
		if cn := str(v, "configMap", "name"); cn != "" && cn != str(cm, "metadata", "name") {
			bad("volume %s names ConfigMap %q, which the file does not define", str(v, "name"), cn)
		}
		if cl := str(v, "persistentVolumeClaim", "claimName"); cl != "" && !claims[cl] {
			bad("volume %s names claim %q, which records-pvc.yaml does not define", str(v, "name"), cl)
		}
	}
	return errs
}

func claims(t *testing.T) map[string]bool {
	m := map[string]bool{}
	for _, d := range readManifest(t, "records-pvc.yaml") {
		if str(d, "kind") == "PersistentVolumeClaim" {
			if !slices.Contains(list(d, "spec", "accessModes"), any("ReadWriteMany")) {
				t.Errorf("claim %s is not ReadWriteMany: the Job's pods may run on several nodes", str(d, "metadata", "name"))
			}
			m[str(d, "metadata", "name")] = true
		}
	}
	return m
}

func TestEvalJob(t *testing.T) {
	cm, job := evalJob(t)
	for _, e := range checkEvalJob(cm, job, claims(t)) {
		t.Error(e)
	}
}

func checkARC(values, workflow obj) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, "arc: "+fmt.Sprintf(f, a...)) }
	for _, k := range []string{"githubConfigUrl", "githubConfigSecret"} {
		if str(values, k) == "" {
			bad("values lack %s", k)
		}
	}
	spec := path(values, "template", "spec")
	errs = append(errs, checkPodSpec("arc runner", spec)...)
	init := path(spec, "initContainers", 0)
	if str(init, "image") != image || str(init, "command", 1) != harnessBin {
		bad("the init container does not copy %s from %s", harnessBin, image)
	}
	dst := str(init, "command", 2)
	var binMount string
	for _, m := range list(spec, "containers", 0, "volumeMounts") {
		if str(m, "name") == str(init, "volumeMounts", 0, "name") {
			binMount = str(m, "mountPath")
		}
	}
	if binMount == "" || filepath.Dir(dst) != str(init, "volumeMounts", 0, "mountPath") {
		bad("the runner does not mount the volume the init container copies the harness into")
	}
	jobs, _ := path(workflow, "jobs").(obj)
	if len(jobs) == 0 {
		bad("the workflow has no jobs")
	}
	for name, j := range jobs {
		shell := str(j, "defaults", "run", "shell")
		want := binMount + "/" + filepath.Base(dst) + " exec "
		if !strings.HasPrefix(shell, want) || !strings.HasSuffix(shell, "{0}") {
			bad("job %s: defaults.run.shell %q does not wrap the step script ({0}) in %q", name, shell, want+"... ")
		}
		if !strings.Contains(shell, "--confine strict") {
			bad("job %s: the shell does not ask for --confine strict", name)
		}
		if !strings.Contains(shell, "--limits-from enclosing") {
			bad("job %s: strict in a runner pod needs --limits-from enclosing (the pod cannot make cgroup leaves)", name)
		}
		if str(j, "runs-on") == "" {
			bad("job %s: no runs-on", name)
		}
	}
	return errs
}

func TestARC(t *testing.T) {
	v := readManifest(t, "arc-runner-values.yaml")
	w := readManifest(t, "arc-workflow.yaml")
	for _, e := range checkARC(v[0], w[0]) {
		t.Error(e)
	}
}

// TestChecksCatchMistakes changes one thing at a time in the real
// manifests and requires the checks to notice.
func TestChecksCatchMistakes(t *testing.T) {
	clone := func(o obj) obj {
		b, _ := json.Marshal(o)
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var c obj
		if err := d.Decode(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	set := func(o any, v any, keys ...any) {
		parent := path(o, keys[:len(keys)-1]...)
		switch k := keys[len(keys)-1].(type) {
		case string:
			parent.(obj)[k] = v
		case int:
			parent.([]any)[k] = v
		}
	}
	cm, job := evalJob(t)
	cl := claims(t)
	if errs := checkEvalJob(cm, job, cl); len(errs) != 0 {
		t.Fatalf("the shipped Job fails its checks: %v", errs)
	}
	c := []any{"spec", "template", "spec", "containers", 0}
	mutations := map[string]func(j obj){
		"privileged": func(j obj) { set(j, true, append(c, "securityContext", "privileged")...) },
		"other profile": func(j obj) {
			set(j, "other.json", "spec", "template", "spec", "securityContext", "seccompProfile", "localhostProfile")
		},
		"runtime default": func(j obj) {
			set(j, obj{"type": "RuntimeDefault"}, "spec", "template", "spec", "securityContext", "seccompProfile")
		},
		"no limits":   func(j obj) { set(j, obj{"cpu": "1"}, append(c, "resources", "limits")...) },
		"masked proc": func(j obj) { set(j, "Default", append(c, "securityContext", "procMount")...) },
		"host users":  func(j obj) { set(j, true, "spec", "template", "spec", "hostUsers") },
		"root":        func(j obj) { set(j, json.Number("0"), "spec", "template", "spec", "securityContext", "runAsUser") },
		"caps kept":   func(j obj) { set(j, obj{"drop": []any{"NET_RAW"}}, append(c, "securityContext", "capabilities")...) },
		"auto": func(j obj) {
			set(j, []any{"exec b10x-harness run --policy /tasks/policy.toml --confine auto --record \"/records/x\" --json $JOB_COMPLETION_INDEX"}, append(c, "args")...)
		},
		"no memory limit":  func(j obj) { set(j, obj{"cpu": "2"}, append(c, "resources", "limits")...) },
		"more completions": func(j obj) { set(j, json.Number(strconv.Itoa(9)), "spec", "completions") },
		"unknown claim": func(j obj) {
			set(j, "nosuch", "spec", "template", "spec", "volumes", 2, "persistentVolumeClaim", "claimName")
		},
		"no record":         func(j obj) { set(j, []any{"exec b10x-harness run --json"}, append(c, "args")...) },
		"escalation":        func(j obj) { set(j, true, append(c, "securityContext", "allowPrivilegeEscalation")...) },
		"undefined volume":  func(j obj) { set(j, obj{"name": "nosuch", "mountPath": "/x"}, append(c, "volumeMounts", 0)...) },
		"not indexed":       func(j obj) { set(j, "NonIndexed", "spec", "completionMode") },
		"container profile": func(j obj) { set(j, "x.json", append(c, "securityContext", "seccompProfile", "localhostProfile")...) },
	}
	for name, mutate := range mutations {
		j := clone(job)
		mutate(j)
		if errs := checkEvalJob(cm, j, cl); len(errs) == 0 {
			t.Errorf("mutation %q: the checks found nothing", name)
		}
	}
	v := readManifest(t, "arc-runner-values.yaml")[0]
	w := readManifest(t, "arc-workflow.yaml")[0]
	if errs := checkARC(v, w); len(errs) != 0 {
		t.Fatalf("the shipped ARC files fail their checks: %v", errs)
	}
	arcMutations := map[string]func(v, w obj){
		"unwrapped steps": func(v, w obj) { set(w, "bash {0}", "jobs", "test", "defaults", "run", "shell") },
		"runner masked":   func(v, w obj) { set(v, "Default", "template", "spec", "containers", 0, "securityContext", "procMount") },
		"no bin mount":    func(v, w obj) { set(v, []any{}, "template", "spec", "containers", 0, "volumeMounts") },
		"wrong copy":      func(v, w obj) { set(v, "/bin/b10x-harness", "template", "spec", "initContainers", 0, "command", 1) },
		"no secret":       func(v, w obj) { delete(v, "githubConfigSecret") },
	}
	for name, mutate := range arcMutations {
		vv, ww := clone(v), clone(w)
		mutate(vv, ww)
		if errs := checkARC(vv, ww); len(errs) == 0 {
			t.Errorf("ARC mutation %q: the checks found nothing", name)
		}
	}
}

func TestParseManifestRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"block YAML":      "apiVersion: v1\nkind: Pod\n",
		"empty":           "# only a comment\n",
		"two values":      "{}\n{}\n",
		"trailing comma":  "{\"a\": 1,}\n",
		"inline # inside": "{\"a\": 1 # comment\n}\n",
	} {
		if _, err := parseManifest([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
