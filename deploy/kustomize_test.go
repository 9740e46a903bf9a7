package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// kustomizeBuild builds the kustomization in dir as `kubectl kustomize`
// does, for the part of kustomize the manifests use: resources (files and
// directories), images, configMapGenerator with generatorOptions, and
// inline JSON 6902 patches. kustomize is not a dependency: this is a
// checker, stricter than kustomize where kustomize would say nothing.
// kustomization.yaml is read strictly (a field it does not know is an
// error, so nothing the manifests set is skipped), and a patch or an image
// that matches no resource is an error (kustomize ignores both).
//
// Like kustomize, it refuses a file outside the kustomization's directory
// (the load restrictor) and a base that contains the overlay naming it
// (kustomize's cycle check: an overlay cannot lie inside its base).
func kustomizeBuild(dir string) ([]obj, error) {
	docs, hashed, err := buildKustomization(dir, nil)
	if err != nil {
		return nil, err
	}
	// The hash suffix, and the Job's references rewritten to the new name,
	// as kustomize does for a generated ConfigMap it may rename.
	renamed := map[string]string{}
	for _, d := range docs {
		if name := str(d, "metadata", "name"); str(d, "kind") == "ConfigMap" && hashed[name] {
			b, _ := yaml.Marshal(path(d, "data"))
			sum := sha256.Sum256(b)
			renamed[name] = name + "-" + hex.EncodeToString(sum[:])[:10]
			d["metadata"].(obj)["name"] = renamed[name]
		}
	}
	for _, d := range docs {
		for _, v := range list(d, "spec", "template", "spec", "volumes") {
			if n, ok := renamed[str(v, "configMap", "name")]; ok {
				v.(obj)["configMap"].(obj)["name"] = n
			}
		}
	}
	return docs, nil
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
	ConfigMapGenerator []struct {
		Name     string   `json:"name"`
		Behavior string   `json:"behavior"`
		Files    []string `json:"files"`
	} `json:"configMapGenerator"`
	GeneratorOptions struct {
		DisableNameSuffixHash bool `json:"disableNameSuffixHash"`
	} `json:"generatorOptions"`
	Patches []struct {
		Target struct {
			Group   string `json:"group"`
			Version string `json:"version"`
			Kind    string `json:"kind"`
			Name    string `json:"name"`
		} `json:"target"`
		Patch string `json:"patch"`
	} `json:"patches"`
}

func readKustomization(dir string) (*kustomization, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s/kustomization.yaml: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", dir, k.APIVersion, k.Kind)
	}
	return &k, nil
}

// within resolves name relative to dir and refuses it outside dir.
func within(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if rel, err := filepath.Rel(dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s: %s is not in or below the kustomization's directory (kustomize's load restrictor refuses it)", dir, name)
	}
	return p, nil
}

func id(d obj) string { return str(d, "kind") + "/" + str(d, "metadata", "name") }

// buildKustomization returns the resources of the kustomization in dir
// and which generated ConfigMaps get a hash suffix. visited holds the
// directories of the overlays that led here.
func buildKustomization(dir string, visited []string) ([]obj, map[string]bool, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range visited {
		if v == dir || strings.HasPrefix(v, dir+"/") {
			return nil, nil, fmt.Errorf("cycle: the base %s contains the overlay %s (kustomize refuses it)", dir, v)
		}
	}
	k, err := readKustomization(dir)
	if err != nil {
		return nil, nil, err
	}
	var docs []obj
	hashed := map[string]bool{}
	byID := map[string]obj{}
	add := func(d obj) error {
		if byID[id(d)] != nil {
			return fmt.Errorf("%s: %s is defined twice", dir, id(d))
		}
		byID[id(d)] = d
		docs = append(docs, d)
		return nil
	}
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: resource %s: %w", dir, r, err)
		}
		var got []obj
		if fi.IsDir() {
			var h map[string]bool
			if got, h, err = buildKustomization(p, append(visited, dir)); err != nil {
				return nil, nil, err
			}
			for n, v := range h {
				hashed[n] = v
			}
		} else {
			if p, err = within(dir, r); err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, err
			}
			if got, err = parseManifest(b); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p, err)
			}
		}
		for _, d := range got {
			if err := add(d); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, g := range k.ConfigMapGenerator {
		data := obj{}
		for _, f := range g.Files {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = filepath.Base(f), f
			}
			p, err := within(dir, file)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: configMapGenerator %s: %w", dir, g.Name, err)
			}
			if _, dup := data[key]; dup {
				return nil, nil, fmt.Errorf("%s: configMapGenerator %s: key %s twice", dir, g.Name, key)
			}
			data[key] = string(b)
		}
		existing := byID["ConfigMap/"+g.Name]
		switch g.Behavior {
		case "", "create":
			if err := add(obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": g.Name}, "data": data}); err != nil {
				return nil, nil, err
			}
		case "merge", "replace":
			if existing == nil {
				return nil, nil, fmt.Errorf("%s: configMapGenerator %s: behavior %s, but no base defines it", dir, g.Name, g.Behavior)
			}
			if g.Behavior == "replace" {
				existing["data"] = obj{}
			}
			for key, v := range data {
				existing["data"].(obj)[key] = v
			}
		default:
			return nil, nil, fmt.Errorf("%s: configMapGenerator %s: behavior %q", dir, g.Name, g.Behavior)
		}
		hashed[g.Name] = !k.GeneratorOptions.DisableNameSuffixHash
	}
	for i, p := range k.Patches {
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := yaml.UnmarshalStrict([]byte(p.Patch), &ops); err != nil || len(ops) == 0 {
			return nil, nil, fmt.Errorf("%s: patch %d is not an inline JSON 6902 patch (the checker reads no other kind): %v", dir, i+1, err)
		}
		matched := 0
		for _, d := range docs {
			group, version, _ := strings.Cut(str(d, "apiVersion"), "/")
			if version == "" {
				group, version = "", group
			}
			t := p.Target
			if (t.Kind != "" && t.Kind != str(d, "kind")) || (t.Name != "" && t.Name != str(d, "metadata", "name")) ||
				(t.Group != "" && t.Group != group) || (t.Version != "" && t.Version != version) {
				continue
			}
			matched++
			for _, op := range ops {
				// The value through JSON, so that numbers are json.Number
				// as in every parsed document.
				v, err := reparse(op.Value)
				if err != nil {
					return nil, nil, err
				}
				if err := applyOp(d, op.Op, op.Path, v); err != nil {
					return nil, nil, fmt.Errorf("%s: patch %d on %s: %w", dir, i+1, id(d), err)
				}
			}
		}
		if matched == 0 {
			return nil, nil, fmt.Errorf("%s: patch %d: its target %+v matches no resource", dir, i+1, p.Target)
		}
	}
	for _, im := range k.Images {
		matched := 0
		for _, d := range docs {
			spec := path(d, "spec", "template", "spec")
			for _, c := range append(list(spec, "initContainers"), list(spec, "containers")...) {
				name, tag := splitImage(str(c, "image"))
				if name != im.Name {
					continue
				}
				matched++
				if im.NewName != "" {
					name = im.NewName
				}
				if im.NewTag != "" {
					tag = im.NewTag
				}
				c.(obj)["image"] = name + ":" + tag
			}
		}
		if matched == 0 {
			return nil, nil, fmt.Errorf("%s: images: %s matches no container", dir, im.Name)
		}
	}
	return docs, hashed, nil
}

// splitImage splits an image reference into its name and tag (a colon
// after the last slash; before it, a colon is a registry's port).
func splitImage(ref string) (name, tag string) {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

func reparse(v any) (any, error) {
	b, err := yaml.Marshal(obj{"v": v})
	if err != nil {
		return nil, err
	}
	o, err := parseDocument(b)
	if err != nil {
		return nil, err
	}
	return o["v"], nil
}

// applyOp applies one JSON 6902 operation (add, replace, remove) at the
// JSON pointer ptr of d. replace and remove need the location to exist.
func applyOp(d obj, op, ptr string, v any) error {
	if !strings.HasPrefix(ptr, "/") {
		return fmt.Errorf("path %q is not a JSON pointer", ptr)
	}
	var keys []string
	for _, k := range strings.Split(ptr[1:], "/") {
		keys = append(keys, strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~"))
	}
	var parent any = d
	for _, k := range keys[:len(keys)-1] {
		switch p := parent.(type) {
		case obj:
			parent = p[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(p) {
				return fmt.Errorf("%s: no element %s", ptr, k)
			}
			parent = p[i]
		}
		if parent == nil {
			return fmt.Errorf("%s: %s does not exist", ptr, k)
		}
	}
	last := keys[len(keys)-1]
	m, ok := parent.(obj)
	if !ok {
		return fmt.Errorf("%s: the checker patches only mappings", ptr)
	}
	if _, exists := m[last]; !exists && op != "add" {
		return fmt.Errorf("%s: %s on a location that does not exist", ptr, op)
	}
	switch op {
	case "add", "replace":
		m[last] = v
	case "remove":
		delete(m, last)
	default:
		return fmt.Errorf("%s: operation %q (the checker knows add, replace, remove)", ptr, op)
	}
	return nil
}

// stableNames checks the names other files and tests rely on: the
// ConfigMap, the Job, the claim, the container, its volumes and mount
// paths, and the files its command reads.
func stableNames(docs []obj) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	ids := map[string]obj{}
	for _, d := range docs {
		ids[id(d)] = d
	}
	for _, want := range []string{"ConfigMap/b10x-eval-tasks", "Job/b10x-eval", "PersistentVolumeClaim/b10x-records"} {
		if ids[want] == nil {
			var have []string
			for k := range ids {
				have = append(have, k)
			}
			sort.Strings(have)
			bad("no %s (have %v): its name is what overlays and the cluster test name", want, have)
		}
	}
	spec := path(ids["Job/b10x-eval"], "spec", "template", "spec")
	c := path(spec, "containers", 0)
	if str(c, "name") != "harness" {
		bad("the Job's container is %q, not harness", str(c, "name"))
	}
	var vols []string
	for _, v := range list(spec, "volumes") {
		vols = append(vols, str(v, "name"))
	}
	if !reflect.DeepEqual(vols, []string{"workspace", "tasks", "records"}) {
		bad("the Job's volumes are %v, not workspace, tasks, records", vols)
	}
	mounts := map[string]string{}
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "name")] = str(m, "mountPath")
	}
	if !reflect.DeepEqual(mounts, map[string]string{"workspace": "/workspace", "tasks": "/tasks", "records": "/records"}) {
		bad("the container mounts %v, not /workspace, /tasks and /records", mounts)
	}
	args := fmt.Sprint(list(c, "args"))
	for _, want := range []string{"/tasks/policy.toml", "/tasks/task-$i.txt"} {
		if !strings.Contains(args, want) {
			bad("the container's args do not read %s", want)
		}
	}
	return errs
}

func build(t *testing.T, dir string) []obj {
	t.Helper()
	docs, err := kustomizeBuild(dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return docs
}

func kind(docs []obj, k string) obj {
	for _, d := range docs {
		if str(d, "kind") == k {
			return d
		}
	}
	return nil
}

func claimsOf(docs []obj) map[string]bool {
	m := map[string]bool{}
	for _, d := range docs {
		if str(d, "kind") == "PersistentVolumeClaim" {
			m[str(d, "metadata", "name")] = true
		}
	}
	return m
}

// checkBuilt runs every check of the evaluation on a built kustomization.
func checkBuilt(docs []obj) []string {
	errs := stableNames(docs)
	cm, job := kind(docs, "ConfigMap"), kind(docs, "Job")
	if cm == nil || job == nil {
		return append(errs, "want a ConfigMap and a Job")
	}
	return append(errs, checkEvalJob(cm, job, claimsOf(docs))...)
}

func TestKustomization(t *testing.T) {
	base := build(t, "k8s/base")
	for _, e := range checkBuilt(base) {
		t.Errorf("base: %s", e)
	}
	if got := str(kind(base, "Job"), "spec", "template", "spec", "containers", 0, "image"); got != image {
		t.Errorf("base: the Job runs %s, not %s (what make image builds)", got, image)
	}
	// deploy/k8s is the base, so that kubectl apply -k deploy/k8s applies it.
	if top := build(t, "k8s"); !reflect.DeepEqual(top, base) {
		t.Errorf("kustomize build k8s differs from k8s/base")
	}
	k, err := readKustomization("k8s/overlays/example")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.Resources, "../../base") {
		t.Errorf("the example overlay's resources %v do not name the base (../../base)", k.Resources)
	}
	over := build(t, "k8s/overlays/example")
	for _, e := range checkBuilt(over) {
		t.Errorf("overlay: %s", e)
	}
	job := kind(over, "Job")
	for _, f := range []string{"completions", "parallelism"} {
		if n, _ := num(job, "spec", f); n != 5 {
			t.Errorf("overlay: %s is %d, want 5", f, n)
		}
	}
	if got := str(job, "spec", "template", "spec", "containers", 0, "image"); got == image || !strings.HasPrefix(got, "localhost/b10x-harness:") {
		t.Errorf("overlay: the Job runs %s: want another tag of localhost/b10x-harness", got)
	}
	if str(kind(over, "ConfigMap"), "data", "policy.toml") == str(kind(base, "ConfigMap"), "data", "policy.toml") {
		t.Errorf("overlay: the policy is the base's")
	}
}

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKustomizeCatchesMistakes breaks one thing at a time in a copy of
// deploy/k8s and requires the build or the checks to refuse it.
func TestKustomizeCatchesMistakes(t *testing.T) {
	edit := func(t *testing.T, file, old, new string) {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", file, old)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(t *testing.T, file string) {
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	const baseK, overK = "base/kustomization.yaml", "overlays/example/kustomization.yaml"
	mutations := map[string]struct {
		build  string // the directory built
		mutate func(t *testing.T, dir string)
	}{
		"missing resource":     {"base", func(t *testing.T, d string) { remove(t, filepath.Join(d, "base/records-pvc.yaml")) }},
		"missing task file":    {"base", func(t *testing.T, d string) { remove(t, filepath.Join(d, "base/eval/task-2.txt")) }},
		"task not generated":   {"base", func(t *testing.T, d string) { edit(t, filepath.Join(d, baseK), "      - eval/task-2.txt\n", "") }},
		"policy not generated": {"base", func(t *testing.T, d string) { edit(t, filepath.Join(d, baseK), "      - eval/policy.toml\n", "") }},
		"policy refused": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "base/eval/policy.toml"), `confine = "strict"`, `confine = "sometimes"`)
		}},
		"policy auto": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "base/eval/policy.toml"), `confine = "strict"`, `confine = "auto"`)
		}},
		"overlay policy refused": {"overlays/example", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "overlays/example/policy.toml"), `net = "none"`, `net = "everywhere"`)
		}},
		"hash kept": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, baseK), "disableNameSuffixHash: true", "disableNameSuffixHash: false")
		}},
		"unknown field": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, baseK), "resources:", "namePrefix: x-\nresources:")
		}},
		"file outside root": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, baseK), "eval/task-2.txt", "../arc-workflow.yaml")
		}},
		"image not matched": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, baseK), "\n  - name: localhost/b10x-harness\n", "\n  - name: localhost/other\n")
		}},
		"overlay inside its base": {"overlays/example", func(t *testing.T, d string) { edit(t, filepath.Join(d, overK), "- ../../base", "- ../..") }},
		"patch target missing": {"overlays/example", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, overK), "name: b10x-eval\n", "name: b10x-evals\n")
		}},
		"patch path missing": {"overlays/example", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, overK), "path: /spec/parallelism", "path: /spec/paralelism")
		}},
		"N above the tasks": {"overlays/example", func(t *testing.T, d string) { edit(t, filepath.Join(d, overK), "      - task-4.txt\n", "") }},
		"overlay creates anew": {"overlays/example", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, overK), "behavior: merge", "behavior: create")
		}},
		"Job renamed": {"base", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "base/eval-job.yaml"), "name: b10x-eval\n", "name: eval\n")
		}},
	}
	src, err := filepath.Abs("k8s")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range mutations {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "k8s")
			copyTree(t, src, dir)
			if errs := checkBuilt(build(t, filepath.Join(dir, m.build))); len(errs) != 0 {
				t.Fatalf("the unchanged copy fails: %v", errs)
			}
			m.mutate(t, dir)
			docs, err := kustomizeBuild(filepath.Join(dir, m.build))
			if err != nil {
				t.Logf("refused: %v", err)
				return
			}
			errs := checkBuilt(docs)
			if len(errs) == 0 {
				t.Fatalf("mutation %q: the build and the checks found nothing", name)
			}
			t.Logf("found: %v", errs)
		})
	}
}
