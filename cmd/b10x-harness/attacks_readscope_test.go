package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// Finding 6 of issue 29: a secret in the workspace was readable through
// file_read, search and `cat` in run. The read scope's defaults now deny
// .env and private keys to every read tool and to run children (the view
// masks them); each refusal names its rule.
func TestAttackReadScopeDefaults(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	const secret = "API_KEY=sk-live-123"
	a.write(t, ".env", secret+"\n")
	a.write(t, "deploy/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- "+secret+"\n")
	for _, c := range []struct{ tool, args string }{
		{"file_read", `{"path":".env"}`},
		{"file_read", `{"path":"deploy/id_ed25519"}`},
		{"file_edit", `{"path":".env","old_string":"sk","new_string":"x"}`},
	} {
		at := a.call(t, nil, nil, c.tool, c.args)
		if c.tool == "file_edit" && !atkWrites() {
			// Without a confined workspace (no Landlock) file_edit is
			// not published: refused before any rule is read.
			if at.out["reason"] != "unpublished" || strings.Contains(at.run.stdout, "sk-live") {
				t.Errorf("%s %s: %s", c.tool, c.args, at.run.stdout)
			}
			continue
		}
		if at.out["status"] != "refused" || at.out["reason"] != "denied_path" || !strings.Contains(at.run.stdout, "read_scope rule") || strings.Contains(at.run.stdout, "sk-live") {
			t.Errorf("%s %s: %s", c.tool, c.args, at.run.stdout)
		}
	}
	at := a.call(t, nil, nil, "search", `{"pattern":"sk-live"}`)
	if at.out["status"] != "executed" || strings.Contains(at.run.stdout, "sk-live-123") || !strings.Contains(at.run.stdout, "content denied by read_scope **/.env=denied") {
		t.Errorf("search: %s", at.run.stdout)
	}
	if !atkExecution() {
		return
	}
	script := `cat .env; cat deploy/id_ed25519; grep -r sk-live . ; tar cf - .env 2>/dev/null | strings; echo ran`
	argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	at = a.call(t, nil, runFlags("sh"), "run", string(argv))
	if at.out["status"] != "executed" || !strings.Contains(at.run.stdout, "ran") || strings.Contains(at.run.stdout, "sk-live") {
		t.Errorf("run: a child read the masked secret: %s", at.run.stdout)
	}
	// An allow rule first turns a default off for what it names.
	at = a.call(t, nil, []string{"--read-scope", ".env=allowed"}, "file_read", `{"path":".env"}`)
	if at.out["status"] != "executed" || !strings.Contains(at.run.stdout, "sk-live") {
		t.Errorf("with --read-scope .env=allowed: %s", at.run.stdout)
	}
}

// The gate keeps what the masks' walk found in each directory from one run
// call to the next (decision 0096): a secret that appears between two
// calls of one session, written by the user or renamed in with its
// directory, or written by a child that then sets its directory's mtime
// back, must be masked in the next call's view all the same.
func TestAttackReadScopeAcrossCalls(t *testing.T) {
	t.Parallel()
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	a := newAtkWS(t)
	a.write(t, "keys/README", "keys go here\n")
	a.write(t, "a/b/code.go", "package b\n")
	// Older than the margin within which a directory's listing is not kept.
	time.Sleep(2200 * time.Millisecond)
	s := mcpMustConnect(t, nil, "--workspace", a.ws, "--allow-program", "sh", "--approve", "all")
	run := func(script string) string {
		t.Helper()
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		_, o := s.call(t, "run", argv)
		res, _ := o["result"].(string)
		if mcpReason(o) != "executed" || !strings.Contains(res, "ran") {
			t.Fatalf("run %q: %v", script, o)
		}
		return res
	}
	for i := 0; i < 2; i++ {
		run("ls keys a/b; echo ran")
	}
	a.write(t, "keys/new.pem", "-----BEGIN PRIVATE KEY----- sk-live-1\n")
	outside := filepath.Join(a.base, "outdir", "moved")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, ".env"), []byte("API_KEY=sk-live-2\n"), 0o644))
	must(t, os.Rename(outside, filepath.Join(a.ws, "a/b/moved")))
	res := run(`cat keys/new.pem a/b/moved/.env; printf 'sk-live-3' > a/b/own.key; touch -d 2001-01-01 a/b; echo ran`)
	if strings.Contains(res, "sk-live") {
		t.Fatalf("a secret that appeared between two calls was read: %s", res)
	}
	if res = run("cat a/b/own.key; echo ran"); strings.Contains(res, "sk-live") {
		t.Fatalf("a secret a child wrote, its directory's mtime set back, was read in the next call: %s", res)
	}
}

// A child moves a directory of secrets deeper than the masks' walk goes
// (it may rename the parent of a masked file): the next run call is
// refused, naming the directory, and its program never reads the key.
func TestAttackReadScopeTooDeep(t *testing.T) {
	t.Parallel()
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	a := newAtkWS(t)
	a.write(t, "keys/prod.pem", "-----BEGIN PRIVATE KEY----- sk-live-DEEP\n")
	s := mcpMustConnect(t, nil, "--workspace", a.ws, "--allow-program", "sh", "--approve", "all")
	run := func(script string) (string, map[string]any) {
		t.Helper()
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		_, o := s.call(t, "run", argv)
		res, _ := o["result"].(string)
		msg, _ := o["message"].(string)
		return res + msg, o
	}
	const deep = `d=x; for i in $(seq 1 300); do d="$d/x"; done`
	if res, o := run(deep + `; mkdir -p "$d" && mv keys "$d/keys" && echo moved`); mcpReason(o) != "executed" || !strings.Contains(res, "moved") {
		t.Fatalf("moving keys deep: %v", o)
	}
	res, o := run(deep + `; cat "$d/keys/prod.pem"; echo ran`)
	if strings.Contains(res, "sk-live") || strings.Contains(res, "ran") || mcpReason(o) != "denied_path" || !strings.Contains(res, "read_scope could not be checked beneath x/x/") {
		t.Fatalf("a secret moved deeper than the walk: %v", o)
	}
}

// swapperArg makes the test binary the swapping program of a run call
// (every VM guest has it; none has Python): it swaps the directories a and
// b of its working directory (renameat2 RENAME_EXCHANGE) as fast as it
// can until the file "stop" appears or argv[2] seconds pass, and prints
// how many swaps it made.
const swapperArg = "-b10x-swapper"

func swapper(args []string) int {
	secs, err := strconv.Atoi(args[0])
	if err != nil {
		return 2
	}
	end, n := time.Now().Add(time.Duration(secs)*time.Second), 0
	for time.Now().Before(end) {
		if _, err := os.Lstat("stop"); err == nil {
			break
		}
		for range 200 {
			if err := unix.Renameat2(unix.AT_FDCWD, "a", unix.AT_FDCWD, "b", unix.RENAME_EXCHANGE); err != nil {
				fmt.Println("renameat2:", err)
				return 1
			}
			n++
		}
	}
	fmt.Println("swaps", n)
	return 0
}

// One run call's program swaps a directory holding .env with a decoy that
// holds none, back and forth (RENAME_EXCHANGE), while other run calls of
// the same session start: each new call's masks are found by a walk of
// the workspace and bound by name, and a walk that read "a" after a swap
// and "b" after the next found no .env at all. Every call must start
// while the swapping program is paused (its leaf frozen), so each sees
// the secret masked under whichever name it has, and reads nothing.
func TestAttackReadScopeConcurrentSwap(t *testing.T) {
	t.Parallel()
	a, s, sw := swapSession(t, map[string]string{"a/.env": "API_KEY=sk-live-swapped\n", "a/x": "real\n", "b/x": "decoy\n"}, "b/.env")
	defer s.close(t)

	// Forty calls, or fewer once the swapper has stopped (under emulation
	// a call takes about a second), but at least three.
	calls, masked := 0, 0
	for ; calls < 40 && (!sw.ended() || calls < 3); calls++ {
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "cat a/.env b/.env 2>/dev/null; echo ran"}})
		_, r := s.call(t, "run", argv)
		res, _ := r["result"].(string)
		if strings.Contains(res, "sk-live") {
			t.Fatalf("call %d read the secret while another call swapped its directory: %v", calls, r)
		}
		if mcpReason(r) != "executed" || !strings.Contains(res, "ran") {
			t.Fatalf("call %d: %v", calls, r)
		}
		if strings.Contains(res, ".env") {
			masked++ // the masked read is listed after the output
		}
		sw.poll()
	}
	o := sw.stop(t, a)
	res, _ := o["result"].(string)
	var swaps int
	if i := strings.Index(res, "swaps "); i >= 0 {
		fmt.Sscan(res[i+len("swaps "):], &swaps)
	}
	t.Logf("%d calls, %d said they read a masked .env; the other call swapped %d times", calls, masked, swaps)
	if mcpReason(o) != "executed" || swaps < 1000 {
		t.Fatalf("the swapping call: %v", o)
	}
	if masked == 0 {
		t.Fatalf("no call said it read a masked .env: the attack did not reach the secret's name")
	}
}

// swapSession is the set-up of the concurrent-swap attacks: a workspace
// with files (relative path to contents), an MCP session on it that
// allows sh and the test binary, two run calls at once and extra flags,
// and a run call of the test binary swapping its directories a and b,
// which has swapped once moved (a path it moves) appears.
func swapSession(t *testing.T, files map[string]string, moved string, extra ...string) (*atkWS, *mcpServer, *swapCall) {
	t.Helper()
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	// Without cgroup leaves there is nothing to pause a call by: the
	// shield is max_parallel 1 there (decision 0097).
	testenv.Require(t, atkLayer(t, "cgroup-leaf"), "cgroup leaves the harness can freeze", testenv.ShapeCgroupV1)
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	a := newAtkWS(t)
	for rel, body := range files {
		a.write(t, rel, body)
	}
	args := append([]string{"--workspace", a.ws, "--allow-program", "sh", "--allow-program", self,
		"--approve", "all", "--max-parallel", "2", "--timeout", "2m"}, extra...)
	s := mcpMustConnect(t, nil, args...)
	return a, s, &swapCall{c: startSwapper(t, s, self, filepath.Join(a.ws, moved))}
}

// swapCall is the swapping run call: its outcome once it has ended.
type swapCall struct {
	c <-chan map[string]any
	o map[string]any
}

// poll takes the outcome if the call has ended.
func (w *swapCall) poll() {
	if w.o == nil {
		select {
		case w.o = <-w.c:
		default:
		}
	}
}

// ended reports whether poll has seen the call end.
func (w *swapCall) ended() bool { return w.o != nil }

// stop tells the swapping program to stop (the file stop in the
// workspace) and returns the call's outcome.
func (w *swapCall) stop(t *testing.T, a *atkWS) map[string]any {
	a.write(t, "stop", "")
	if w.o == nil {
		w.o = <-w.c
	}
	return w.o
}

// startSwapper starts the test binary as a run call of s that swaps the
// directories a and b of the workspace for up to 20 seconds, and returns
// once it has swapped (the path moved appears); the channel gets the
// call's outcome.
func startSwapper(t *testing.T, s *mcpServer, self, moved string) chan map[string]any {
	t.Helper()
	swapper := make(chan map[string]any, 1)
	go func() {
		argv, _ := json.Marshal(map[string]any{"argv": []string{self, swapperArg, "20"}})
		r, err := s.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(argv)})
		o := map[string]any{"error": fmt.Sprint(err)}
		if err == nil {
			if o, err = mcpOutcome(r); err != nil {
				o = map[string]any{"error": err.Error()}
			}
		}
		swapper <- o
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(moved); err == nil {
			return swapper
		}
		select {
		case o := <-swapper:
			t.Fatalf("the swapping call ended before it swapped: %v", o)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the swapping program never swapped a and b")
		}
	}
}

// One run call's program swaps two directories back and forth while
// other run calls each create a file a denied write-scope rule matches
// in one of them: the check after each call, which finds and removes such
// a file, walks while the swapping program is paused, so it never misses
// one (a walk that read "a" after one swap and "b" after the next would
// see the decoy twice), and nothing of the kind is left at the end.
func TestAttackWriteScopeAfterConcurrentSwap(t *testing.T) {
	t.Parallel()
	a, s, sw := swapSession(t, map[string]string{"a/marker": "a\n", "b/x": "b\n"}, "b/marker", "--write-scope", "**/*.pem=denied")
	defer s.close(t)

	left := func() string {
		for _, d := range []string{"a", "b"} {
			if _, err := os.Lstat(filepath.Join(a.ws, d, "new.pem")); err == nil {
				return d + "/new.pem"
			}
		}
		return ""
	}
	calls, own := 0, 0
	for ; calls < 40 && (!sw.ended() || calls < 3); calls++ {
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "echo key > a/new.pem; echo ran"}})
		_, r := s.call(t, "run", argv)
		msg, _ := r["message"].(string)
		switch {
		case mcpReason(r) == "denied_path" && strings.Contains(msg, "new.pem (**/*.pem=denied): created, removed again"):
			own++
		case mcpReason(r) == "executed" && left() == "":
			// The swapping call's own check, at its end, found it first
			// (the check after a call sees what any call left).
		default:
			t.Fatalf("call %d created a/new.pem under **/*.pem=denied while another call swapped a and b: %v (left: %q)", calls, r, left())
		}
		if f := left(); f != "" {
			t.Fatalf("call %d: %s is left in the workspace", calls, f)
		}
		sw.poll()
	}
	o := sw.stop(t, a)
	if msg, _ := o["message"].(string); mcpReason(o) != "executed" && !(mcpReason(o) == "denied_path" && strings.Contains(msg, "new.pem (**/*.pem=denied): created, removed again")) {
		t.Fatalf("the swapping call: %v", o)
	}
	if f := left(); f != "" || own == 0 {
		t.Fatalf("after %d calls, %q is left, and %d calls found their own file", calls, f, own)
	}
	t.Logf("%d calls, %d found and removed their own file; none was left", calls, own)
}
