package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/internal/testenv"
)

// requireAttributable requires a host where the kernel logs Landlock's
// denials and the harness may read them: the VM shape debian-6.18 (audit
// on); this host, and every other shape, lacks it and says why.
func requireAttributable(t *testing.T) {
	t.Helper()
	s := audit.Probe()
	testenv.Require(t, s.Attributable, "Landlock audit records ("+s.Why+")",
		append([]string{testenv.ShapeDebian61, testenv.ShapeDebian612, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1},
			testenv.HostLacks(!s.Attributable)...)...)
}

// denialLines are the record's denial lines.
func denialLines(t *testing.T, rec string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range readRecord(t, rec) {
		if l["event"] == "denial" {
			out = append(out, l)
		}
	}
	return out
}

// TestKernelDenialsAttributed: a run call whose program the kernel refuses
// (a device node only Landlock forbids; the kernel names the directory it
// was to be made in) gets that denial in its result and
// as a denial line of its record tied to its seq; exec says it on stderr
// after the command and records it; a program that makes 300 denied
// requests leaves at most max_denials lines and counts the rest.
func TestKernelDenialsAttributed(t *testing.T) {
	requireAttributable(t)
	ws := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "sh",
		"run", `{"argv":["sh","-c","mknod c0 c 1 3; echo done"]}`)
	out := outcome(t, r)
	result, _ := out["result"].(string)
	if r.code != 0 || !strings.Contains(result, "kernel: 1 request(s) of the program refused by the sandbox:") || !strings.Contains(result, "landlock: fs.make_char "+ws) {
		t.Fatalf("exit %d, result %q, stderr %s", r.code, result, r.stderr)
	}
	if meta, _ := out["meta"].(map[string]any); meta["kernel_denials"] != float64(1) {
		t.Errorf("meta kernel_denials %v, want 1", meta["kernel_denials"])
	}
	ds := denialLines(t, rec)
	if len(ds) != 1 || ds[0]["seq"] != float64(1) || ds[0]["layer"] != "landlock" || ds[0]["operation"] != "fs.make_char" {
		t.Errorf("record's denial lines %v, want one fs.make_char of call 1", ds)
	}

	erec := filepath.Join(t.TempDir(), "exec.jsonl")
	r = harness(t, "", "exec", "--workspace", ws, "--record", erec, "--", "sh", "-c", "mknod b0 b 1 1; exit 0")
	if r.code != 0 || !strings.Contains(r.stderr, "landlock: fs.make_block "+ws) {
		t.Fatalf("exec: exit %d, stderr %s", r.code, r.stderr)
	}
	if ds := denialLines(t, erec); len(ds) != 1 || ds[0]["seq"] != float64(1) || ds[0]["operation"] != "fs.make_block" {
		t.Errorf("exec's denial lines %v", ds)
	}

	// A flood of denied requests: at most the cap of lines, and a count.
	frec := filepath.Join(t.TempDir(), "flood.jsonl")
	r = harness(t, "", "call", "--workspace", ws, "--record", frec, "--yes", "--allow-program", "sh", "--max-denials", "5",
		"run", `{"argv":["sh","-c","i=0; while [ $i -lt 300 ]; do mknod n$i c 1 3 2>/dev/null; i=$((i+1)); done; echo done"]}`)
	out = outcome(t, r)
	result, _ = out["result"].(string)
	ds = denialLines(t, frec)
	if r.code != 0 || len(ds) != 5 || strings.Count(result, "landlock: fs.make_char") != 5 || !strings.Contains(result, "more, counted, not listed") {
		t.Fatalf("flood: exit %d, %d denial lines, result %q", r.code, len(ds), result)
	}
	dropped, _ := ds[4]["dropped"].(float64)
	if meta, _ := out["meta"].(map[string]any); dropped < 1 || meta["kernel_denials"] != 5+dropped {
		t.Errorf("flood: the last line counts %v more, meta says %v in all", dropped, meta["kernel_denials"])
	}
	if _, err := os.Stat(filepath.Join(ws, "n1")); err == nil {
		t.Error("a device node was made")
	}
}

// TestKernelDenialsOfSeccompAttributed: a run call whose program makes system
// calls the child's seccomp filter refuses (busybox's unshare -U, mount
// and arping: unshare(CLONE_NEWUSER), mount(2), socket(AF_PACKET)) gets
// each in its result and as a denial line of layer seccomp tied to its
// seq; exec says them on stderr after the command and records them; a
// program that makes 100 refused calls leaves at most max_denials lines
// and counts the rest (decision 0090). The filter hands its refusals to
// the call's init (a seccomp user notification, Linux 5.0), so this runs
// on every shape and on this host, audit or not.
func TestKernelDenialsOfSeccompAttributed(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	s := spawn.ProbeSeccompDenials()
	testenv.Require(t, s.Attributable, "seccomp user notification ("+s.Why+")", testenv.HostLacks(!s.Attributable)...)
	_, err := exec.LookPath("busybox")
	testenv.Require(t, err == nil, "busybox (its unshare, mount and arping make the refused calls)", testenv.HostLacks(err != nil)...)
	ws := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	script := "busybox unshare -U true; busybox mount -t tmpfs t /tmp; busybox arping -c 1 -I lo 127.0.0.1; echo done"
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "sh",
		"run", `{"argv":["sh","-c","`+script+`"]}`)
	out := outcome(t, r)
	result, _ := out["result"].(string)
	want := []string{"unshare(CLONE_NEWUSER)", "mount", "socket(AF_PACKET)"}
	if r.code != 0 || !strings.Contains(result, "done") || !strings.Contains(result, "request(s) of the program refused by the sandbox:") {
		t.Fatalf("exit %d, result %q, stderr %s", r.code, result, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(result, "\n  seccomp: "+w) {
			t.Errorf("result lacks seccomp: %s: %q", w, result)
		}
	}
	ds := denialLines(t, rec)
	var ops []string
	for _, d := range ds {
		if d["layer"] != "seccomp" {
			continue
		}
		if d["seq"] != float64(1) {
			t.Errorf("denial line %v is not call 1's", d)
		}
		op, _ := d["operation"].(string)
		ops = append(ops, op)
	}
	if strings.Join(ops, " ") != strings.Join(want, " ") {
		t.Errorf("record's seccomp denial lines %q, want %q", ops, want)
	}
	if meta, _ := out["meta"].(map[string]any); meta["kernel_denials"] != float64(len(ds)) {
		t.Errorf("meta kernel_denials %v, want %d", meta["kernel_denials"], len(ds))
	}

	erec := filepath.Join(t.TempDir(), "exec.jsonl")
	r = harness(t, "", "exec", "--workspace", ws, "--record", erec, "--", "sh", "-c", "busybox arping -c 1 -I lo 127.0.0.1; exit 0")
	if r.code != 0 || !strings.Contains(r.stderr, "seccomp: socket(AF_PACKET)") {
		t.Fatalf("exec: exit %d, stderr %s", r.code, r.stderr)
	}
	found := false
	for _, d := range denialLines(t, erec) {
		if d["layer"] == "seccomp" {
			found = d["seq"] == float64(1) && d["operation"] == "socket(AF_PACKET)"
		}
	}
	if !found {
		t.Errorf("exec's denial lines %v", denialLines(t, erec))
	}

	// A flood of refused calls: at most the cap of lines, and a count.
	frec := filepath.Join(t.TempDir(), "flood.jsonl")
	r = harness(t, "", "call", "--workspace", ws, "--record", frec, "--yes", "--allow-program", "sh", "--max-denials", "5",
		"run", `{"argv":["sh","-c","i=0; while [ $i -lt 100 ]; do busybox unshare -U true 2>/dev/null; i=$((i+1)); done; echo done"]}`)
	out = outcome(t, r)
	result, _ = out["result"].(string)
	ds = denialLines(t, frec)
	if r.code != 0 || len(ds) != 5 || strings.Count(result, "seccomp: unshare(CLONE_NEWUSER)") != 5 || !strings.Contains(result, "more, counted, not listed") {
		t.Fatalf("flood: exit %d, %d denial lines, result %q", r.code, len(ds), result)
	}
	dropped, _ := ds[4]["dropped"].(float64)
	if meta, _ := out["meta"].(map[string]any); dropped < 95 || meta["kernel_denials"] != 5+dropped {
		t.Errorf("flood: the last line counts %v more, meta says %v in all", dropped, meta["kernel_denials"])
	}
}

// TestKernelDenialsOfNetnsAttributed: a run call whose program connects
// to an address outside its empty network namespace (busybox nc to
// 192.0.2.1, a documentation address: nothing leaves the namespace) is
// refused by the kernel with ENETUNREACH, and the refusal reaches the
// call's result and the record as a denial line of layer netns tied to its
// seq; under --net proxy a program that ignores the proxy and connects
// directly is refused and recorded the same way (the proxy sees nothing of
// it); exec says it on stderr; a flood leaves at most max_denials lines
// and counts the rest. The namespace's own counters are read by the call's
// init, so this holds on every shape and on this host.
func TestKernelDenialsOfNetnsAttributed(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	_, err := exec.LookPath("busybox")
	testenv.Require(t, err == nil, "busybox (its nc makes the connections)", testenv.HostLacks(err != nil)...)
	ws := t.TempDir()
	connect := "busybox nc -w 1 192.0.2.1 443 </dev/null; echo done"
	for _, net := range []string{"none", "proxy"} {
		rec := filepath.Join(t.TempDir(), "rec.jsonl")
		args := []string{"call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "sh", "--net", net}
		if net == "proxy" {
			args = append(args, "--allow-domain", "example.test")
		}
		r := harness(t, "", append(args, "run", `{"argv":["sh","-c","`+connect+`"]}`)...)
		out := outcome(t, r)
		result, _ := out["result"].(string)
		if r.code != 0 || !strings.Contains(result, "Network is unreachable") || !strings.Contains(result, "\n  netns: net.no_route ×1 (") {
			t.Fatalf("net %s: exit %d, result %q, stderr %s", net, r.code, result, r.stderr)
		}
		var netns []map[string]any
		for _, d := range denialLines(t, rec) {
			if d["layer"] == "netns" {
				netns = append(netns, d)
			}
		}
		if len(netns) != 1 || netns[0]["seq"] != float64(1) || netns[0]["operation"] != "net.no_route" {
			t.Errorf("net %s: the record's netns denial lines %v, want one of call 1", net, netns)
		}
	}

	erec := filepath.Join(t.TempDir(), "exec.jsonl")
	r := harness(t, "", "exec", "--workspace", ws, "--record", erec, "--", "sh", "-c", connect)
	if r.code != 0 || !strings.Contains(r.stderr, "netns: net.no_route ×1") {
		t.Fatalf("exec: exit %d, stderr %s", r.code, r.stderr)
	}

	frec := filepath.Join(t.TempDir(), "flood.jsonl")
	r = harness(t, "", "call", "--workspace", ws, "--record", frec, "--yes", "--allow-program", "sh", "--max-denials", "5",
		"run", `{"argv":["sh","-c","i=0; while [ $i -lt 50 ]; do busybox nc -w 1 192.0.2.1 443 </dev/null 2>/dev/null; i=$((i+1)); done; echo done"]}`)
	out := outcome(t, r)
	result, _ := out["result"].(string)
	ds := denialLines(t, frec)
	if r.code != 0 || len(ds) != 5 || !strings.Contains(result, "netns: net.no_route ×50") {
		t.Fatalf("flood: exit %d, %d denial lines, result %q", r.code, len(ds), result)
	}
	if dropped, _ := ds[4]["dropped"].(float64); dropped != 45 {
		t.Errorf("flood: the last line counts %v more, want 45", dropped)
	}
	if meta, _ := out["meta"].(map[string]any); meta["kernel_denials"] != float64(50) {
		t.Errorf("flood: meta kernel_denials %v, want 50", meta["kernel_denials"])
	}
}

// TestKernelDenialsOfViewAttributed: a run call whose program opens masked
// files (/etc/shadow, masked because not every user may read it, and the
// workspace's .env, which the read scope denies: both read as empty) gets
// each in its result as a view line and as a denial line of layer view
// tied to its seq, once each; exec (which has no read scope: .env is not
// masked there) says /etc/shadow on stderr after the command. The call's
// init watches each mask's own file with inotify, so this holds on every
// shape and on this host (decision 0095).
func TestKernelDenialsOfViewAttributed(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	if _, err := os.Lstat("/etc/shadow"); errors.Is(err, os.ErrNotExist) && testenv.InVM() {
		// A guest's /etc has none: make one, root's alone to read (the VM
		// is ours).
		if err := os.WriteFile("/etc/shadow", []byte("root:$6$fakehash$abcdefabcdef:19000:0:99999:7:::\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	masks, err := spawn.MaskedSystemPaths()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(masks, "/etc/shadow") {
		t.Fatalf("/etc/shadow is not masked here (%v): the test needs a file of /etc not every user may read", masks)
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(ws, ".env")
	if err := os.WriteFile(env, []byte("API_KEY=sk-live-95\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "sh",
		"run", `{"argv":["sh","-c","cat /etc/shadow; cat .env; cat .env; echo done"]}`)
	out := outcome(t, r)
	result, _ := out["result"].(string)
	if r.code != 0 || !strings.Contains(result, "done") || strings.Contains(result, "sk-live") || strings.Contains(result, "root:") {
		t.Fatalf("exit %d, result %q, stderr %s", r.code, result, r.stderr)
	}
	for _, p := range []string{"/etc/shadow", env} {
		if want := "\n  view: fs.read_file " + p + " (masked: reads as empty)"; strings.Count(result, want) != 1 {
			t.Errorf("result lists %q %d times, want once: %q", want, strings.Count(result, want), result)
		}
	}
	var view []map[string]any
	for _, d := range denialLines(t, rec) {
		if d["layer"] == "view" {
			view = append(view, d)
		}
	}
	if len(view) != 2 {
		t.Fatalf("the record's view denial lines %v, want two", view)
	}
	for i, p := range []string{"/etc/shadow", env} {
		if d := view[i]; d["seq"] != float64(1) || d["operation"] != "fs.read_file" || d["object"] != p || d["rule"] != "masked: reads as empty" {
			t.Errorf("view denial line %d: %v, want fs.read_file %s of call 1", i, d, p)
		}
	}
	if meta, _ := out["meta"].(map[string]any); meta["kernel_denials"] != float64(len(denialLines(t, rec))) {
		t.Errorf("meta kernel_denials %v, want %d", meta["kernel_denials"], len(denialLines(t, rec)))
	}

	erec := filepath.Join(t.TempDir(), "exec.jsonl")
	r = harness(t, "", "exec", "--workspace", ws, "--record", erec, "--", "sh", "-c", "cat /etc/shadow; echo done")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exec: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if i := strings.Index(r.stderr, "view: fs.read_file /etc/shadow (masked: reads as empty)"); i < 0 {
		t.Errorf("exec's stderr does not say the masked file: %s", r.stderr)
	}
	found := false
	for _, d := range denialLines(t, erec) {
		if d["layer"] == "view" {
			found = d["seq"] == float64(1) && d["object"] == "/etc/shadow"
		}
	}
	if !found {
		t.Errorf("exec's denial lines %v", denialLines(t, erec))
	}
}
