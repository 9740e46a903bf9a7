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

	"sigs.k8s.io/yaml"

	"github.com/b10x/harness/session"
)

// The manifests are YAML in block style, with comments, in documents
// separated by "---" lines. parseManifest reads them as kubectl and Helm
// do, with sigs.k8s.io/yaml (YAML 1.1 through go.yaml.in/yaml/v2, then
// JSON), strictly: a key given twice in one mapping is refused (sigs.k8s.io/yaml's
// Unmarshal, which is not strict, keeps one of the two without a word). Numbers stay
// json.Number. Note that YAML 1.1 reads an unquoted key `on` as the
// boolean true (the workflow's trigger key comes back as "true"); GitHub
// reads YAML 1.2, and TestWorkflowSchema checks the workflow with GitHub's
// own parser.

type obj = map[string]any

// docSeparator is a line that starts a new YAML document.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func parseManifest(b []byte) ([]obj, error) {
	var docs []obj
	for i, text := range docSeparator.Split(string(b), -1) {
		if onlyComments(text) {
			continue
		}
		o, err := parseDocument([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		docs = append(docs, o)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no document")
	}
	return docs, nil
}

// parseDocument reads one YAML document, which must be a mapping.
func parseDocument(b []byte) (obj, error) {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var o obj
	if err := d.Decode(&o); err != nil {
		return nil, err
	}
	if o == nil {
		return nil, fmt.Errorf("not a mapping")
	}
	return o, nil
}

func onlyComments(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// blockScalarStart matches the end of a line that starts a block scalar
// (| or >, with its chomping and indentation indicators).
var blockScalarStart = regexp.MustCompile(`:\s*[|>][-+0-9]*$|^-\s*[|>][-+0-9]*$`)

// checkLayout returns one message per line that is not block-style YAML
// indented by two spaces: a tab in the indent, an odd indent, or a
// document written as a flow mapping ({...}, the old JSON syntax). The
// text of a block scalar (| or >) is not checked: its indent beyond the
// scalar's own is part of the text.
func checkLayout(name string, b []byte) []string {
	var errs []string
	scalar := -1 // the indent of the line that started a block scalar, or -1
	for i, line := range strings.Split(string(b), "\n") {
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		t := strings.TrimSpace(line)
		if scalar >= 0 && (t == "" || indent > scalar) {
			continue
		}
		scalar = -1
		switch {
		case strings.Contains(line[:indent], "\t"):
			errs = append(errs, fmt.Sprintf("%s:%d: a tab in the indent", name, i+1))
		case t == "" || strings.HasPrefix(t, "#"):
		case indent%2 != 0:
			errs = append(errs, fmt.Sprintf("%s:%d: indent of %d spaces: the manifests indent by 2", name, i+1, indent))
		case indent == 0 && (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")):
			errs = append(errs, fmt.Sprintf("%s:%d: a document in flow style: the manifests are block-style YAML", name, i+1))
		}
		if blockScalarStart.MatchString(t) && !strings.HasPrefix(t, "#") {
			scalar = indent
		}
	}
	return errs
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

// images returns every value of an "image" key in o, at any depth.
func images(o any) []string {
	var out []string
	switch o := o.(type) {
	case obj:
		for k, v := range o {
			if s, ok := v.(string); ok && k == "image" {
				out = append(out, s)
			}
			out = append(out, images(v)...)
		}
	case []any:
		for _, v := range o {
			out = append(out, images(v)...)
		}
	}
	return out
}

// TestEveryManifestParses reads every file under k8s/: each .yaml file is
// block-style YAML that parses strictly, the policy and task files are
// the data of the kustomizations' generators (TestKustomization checks
// them), and nothing else is there.
func TestEveryManifestParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir("k8s", func(f string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(f) {
		case ".toml", ".txt":
			return nil
		case ".yaml":
		default:
			t.Errorf("%s: the manifests end in .yaml (and the generators' data in .toml or .txt)", f)
			return nil
		}
		n++
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, e := range checkLayout(f, b) {
			t.Error(e)
		}
		if !strings.HasPrefix(string(b), "# ") {
			t.Errorf("%s: no header comment", f)
		}
		docs, err := parseManifest(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			return nil
		}
		for i, d := range docs {
			k := str(d, "kind")
			if k != "" && k != "Kustomization" && (str(d, "apiVersion") == "" || str(d, "metadata", "name") == "") {
				t.Errorf("%s document %d: a %s needs apiVersion and metadata.name", f, i+1, k)
			}
			// Every image the manifests name is the one make image
			// builds, or the runner image of Actions Runner Controller.
			for _, img := range images(d) {
				if img != image && !strings.HasPrefix(img, "ghcr.io/actions/actions-runner:") {
					t.Errorf("%s: image %q is neither %q nor the runner image", f, img, image)
				}
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
}

// TestManifestHeaders requires each manifest whose pods run the harness
// (and the kustomization that applies them) to name, in its header
// comment, every cluster setting it depends on.
func TestManifestHeaders(t *testing.T) {
	needs := []string{
		"podPidsLimit",
		"/var/lib/kubelet/seccomp/b10x-harness.json",
		"deploy/seccomp/b10x-harness.json",
		"hostUsers: false",
		"containerd 2",
		"runc >= 1.2",
		"Kubernetes >= 1.33",
		"procMount: Unmasked",
	}
	for _, f := range []string{"base/eval-job.yaml", "base/kustomization.yaml", "arc-runner-values.yaml", "arc-workflow.yaml"} {
		for _, e := range checkHeader(f, readFile(t, filepath.Join("k8s", f)), needs) {
			t.Error(e)
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkHeader returns one message per setting of needs that the header
// comment of b (its first lines that start with #) does not name.
func checkHeader(name string, b []byte, needs []string) []string {
	var header strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		t, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		header.WriteString(strings.TrimSpace(t) + " ")
	}
	// A setting may be broken across comment lines.
	h := strings.Join(strings.Fields(header.String()), " ")
	var errs []string
	for _, n := range needs {
		if !strings.Contains(h, n) {
			errs = append(errs, fmt.Sprintf("%s: the header comment does not name %q", name, n))
		}
	}
	return errs
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

// evalJob is the ConfigMap and the Job that kustomize builds from k8s/base.
func evalJob(t *testing.T) (cm, job obj, claims map[string]bool) {
	docs := build(t, "k8s/base")
	cm, job = kind(docs, "ConfigMap"), kind(docs, "Job")
	if cm == nil || job == nil {
		t.Fatal("k8s/base: want a ConfigMap and a Job")
	}
	claims = claimsOf(docs)
	for _, d := range docs {
		if str(d, "kind") == "PersistentVolumeClaim" && !slices.Contains(list(d, "spec", "accessModes"), any("ReadWriteMany")) {
			t.Errorf("claim %s is not ReadWriteMany: the Job's pods may run on several nodes", str(d, "metadata", "name"))
		}
	}
	return cm, job, claims
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
	if _, ok := path(cm, "data", "policy.toml").(string); !ok {
		bad("the ConfigMap has no policy.toml")
	}
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
			bad("volume %s names ConfigMap %q, which the kustomization does not make", str(v, "name"), cn)
		}
		if cl := str(v, "persistentVolumeClaim", "claimName"); cl != "" && !claims[cl] {
			bad("volume %s names claim %q, which the kustomization does not define", str(v, "name"), cl)
		}
	}
	return errs
}

func TestEvalJob(t *testing.T) {
	cm, job, claims := evalJob(t)
	for _, e := range checkEvalJob(cm, job, claims) {
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
		// The runner splits the shell string into argv itself: nothing in
		// it is expanded, and GitHub refuses expressions in a workflow's
		// defaults.run and a step's shell (arc-workflow.yaml says why the
		// line needs none).
		if strings.Contains(shell, "${{") || strings.Contains(shell, "$") {
			bad("job %s: the shell %q holds an expression or a variable, which the runner does not expand there", name, shell)
		}
		if strings.Contains(shell, "--workspace") {
			bad("job %s: the shell names --workspace: exec's default (the step's directory, the checkout) is the workspace", name)
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
	cm, job, cl := evalJob(t)
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
		"expression in the shell": func(v, w obj) {
			set(w, "/opt/b10x/bin/b10x-harness exec --confine strict --limits-from enclosing --workspace ${{ github.workspace }} -- bash {0}", "jobs", "test", "defaults", "run", "shell")
		},
		"variable in the shell": func(v, w obj) {
			set(w, "/opt/b10x/bin/b10x-harness exec --confine strict --limits-from enclosing --allow-read $RUNNER_TEMP -- bash {0}", "jobs", "test", "defaults", "run", "shell")
		},
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
		"empty":            "# only a comment\n",
		"duplicate key":    "apiVersion: v1\nkind: Pod\nkind: Job\n",
		"duplicate nested": "spec:\n  hostUsers: false\n  hostUsers: true\n",
		"tab indent":       "spec:\n\thostUsers: false\n",
		"not a mapping":    "- a\n- b\n",
		"a scalar":         "just text\n",
		"bad second doc":   "a: 1\n---\nb: [\n",
		"unclosed flow":    "{\"a\": 1\n",
	} {
		if _, err := parseManifest([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// A document of comments alone is no document; numbers stay numbers.
	docs, err := parseManifest([]byte("# head\na: 1\n---\n# only a comment\n---\nb: 2\n"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("two documents around a comment-only one: %v, %v", docs, err)
	}
	if n, ok := num(docs[1], "b"); !ok || n != 2 {
		t.Errorf("the second document: %v", docs[1])
	}
}

// TestLayoutRefuses feeds checkLayout what the manifests must not be.
func TestLayoutRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"JSON syntax":  "# c\n{\n  \"kind\": \"Pod\"\n}\n",
		"odd indent":   "spec:\n   hostUsers: false\n",
		"tab":          "spec:\n\t hostUsers: false\n",
		"flow list":    "[1, 2]\n",
		"after scalar": "a: |\n   text\nb:\n c: 1\n",
	} {
		if errs := checkLayout(name, []byte(text)); len(errs) == 0 {
			t.Errorf("%s: no complaint", name)
		}
	}
	if errs := checkLayout("scalar", []byte("a: |\n   odd text\n     more\nb:\n  c: 1\n")); len(errs) != 0 {
		t.Errorf("the text of a block scalar: %v", errs)
	}
}

// TestHeaderRefuses: checkHeader finds a setting that the header does not
// name, and one named only below the header.
func TestHeaderRefuses(t *testing.T) {
	b := []byte("# needs podPidsLimit and\n# procMount:\n# Unmasked\nkind: Job\n# hostUsers: false\n")
	if errs := checkHeader("x", b, []string{"podPidsLimit", "procMount: Unmasked"}); len(errs) != 0 {
		t.Errorf("a setting across two comment lines: %v", errs)
	}
	if errs := checkHeader("x", b, []string{"hostUsers: false"}); len(errs) != 1 {
		t.Errorf("a setting below the header counted: %v", errs)
	}
}
