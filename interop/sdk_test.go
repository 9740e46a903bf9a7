package interop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/mcp"
)

// sdkCalls are the TypeScript SDK client's calls: a read, an attack, a
// read with Gemini CLI's argument, a refusal.
var sdkCalls = []struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	status    string
	reason    string
	text      string
}{
	{"file_read", map[string]any{"path": "hello.txt"}, "executed", "", helloText},
	{"file_read", map[string]any{"path": "../secret.txt"}, "refused", "denied_path", `refused (denied_path): path "../secret.txt" leaves the workspace`},
	{"file_read", map[string]any{"path": "hello.txt", "wait_for_previous": true}, "executed", "", helloText},
	{"file_write", map[string]any{"path": "new.txt", "content": "x"}, "refused", "approval_rejected", ""},
}

// sdkOut is what sdk-client.mjs prints.
type sdkOut struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	Results         []struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		StructuredContent json.RawMessage            `json:"structuredContent"`
		Meta              map[string]json.RawMessage `json:"_meta"`
		IsError           bool                       `json:"isError"`
	} `json:"results"`
}

// runSDK runs testdata/sdk-client.mjs with mode's arguments.
func runSDK(t *testing.T, f *fixture, mode ...string) sdkOut {
	t.Helper()
	prefix := clientPrefix(t, "sdk")
	calls, _ := json.Marshal(sdkCalls)
	script, err := filepath.Abs("testdata/sdk-client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	out, _ := runClient(t, 60*time.Second, f.ws, baseEnv(f), node, append([]string{script, prefix, string(calls)}, mode...)...)
	var o sdkOut
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("sdk-client.mjs printed %q: %v", out, err)
	}
	return o
}

func checkSDK(t *testing.T, o sdkOut) {
	t.Helper()
	if o.ProtocolVersion != "2025-11-25" || len(o.Tools) != 6 {
		t.Errorf("protocol %q, tools %v", o.ProtocolVersion, o.Tools)
	}
	if len(o.Results) != len(sdkCalls) {
		t.Fatalf("%d results for %d calls", len(o.Results), len(sdkCalls))
	}
	for i, c := range sdkCalls {
		r := o.Results[i]
		var out mcp.Outcome
		_ = json.Unmarshal(r.Meta[mcp.OutcomeMeta], &out)
		if len(r.Content) != 1 || r.StructuredContent != nil || r.IsError != (c.status != "executed") ||
			string(out.Status) != c.status || string(out.Reason) != c.reason || out.Entry != c.Name || out.Seq != int64(i+1) {
			t.Errorf("%s %v: %+v", c.Name, c.Arguments, r)
			continue
		}
		if c.text != "" && r.Content[0].Text != c.text {
			t.Errorf("%s %v: text %q, want %q", c.Name, c.Arguments, r.Content[0].Text, c.text)
		}
	}
}

// TestTypeScriptSDK: a program written with the MCP TypeScript SDK reads
// the outcome as data from _meta and the text from content, over stdio.
func TestTypeScriptSDK(t *testing.T) {
	clientPath(t, "sdk")
	f := newFixture(t)
	checkSDK(t, runSDK(t, f, append([]string{"stdio", f.harness}, f.mcpArgs()...)...))
	checkEnd(t, f, "client_closed")
	checkIgnoredRecorded(t, f, 3)
}

// TestTypeScriptSDKHTTP is TestTypeScriptSDK over streamable HTTP
// (mcp --listen, with the bearer token).
func TestTypeScriptSDKHTTP(t *testing.T) {
	clientPath(t, "sdk")
	f := newFixture(t)
	h := startHTTP(t, f)
	checkSDK(t, runSDK(t, f, "http", h.url, h.token))
	h.stop(t)
	checkEnd(t, f, "stopped")
	checkIgnoredRecorded(t, f, 3)
}

// checkIgnoredRecorded: the record's call seq says wait_for_previous was
// ignored.
func checkIgnoredRecorded(t *testing.T, f *fixture, seq int) {
	t.Helper()
	c := f.calls(t)[seq]
	steps, _ := c["steps"].([]any)
	if first, _ := firstStep(steps); first["step"] != "client" || !strings.Contains(str(first["detail"]), "ignored wait_for_previous=true") {
		t.Errorf("call %d: %v", seq, c)
	}
}

// httpHarness is `b10x-harness mcp --listen` on a loopback port.
type httpHarness struct {
	cmd        *exec.Cmd
	url, token string
	stderr     *syncBuf
	exited     chan error
}

var listening = regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)

// startHTTP starts the harness over HTTP on 127.0.0.1, a free port, with a
// token file of its own; it is stopped (SIGTERM) at the end of the test
// if the test has not stopped it.
func startHTTP(t *testing.T, f *fixture, extra ...string) *httpHarness {
	t.Helper()
	token := fmt.Sprintf("b10x-interop-token-%d-%d-0123456789abcdef", os.Getpid(), time.Now().UnixNano())
	tokFile := filepath.Join(f.dir, "token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &httpHarness{token: token, stderr: &syncBuf{}, exited: make(chan error, 1)}
	args := append(f.mcpArgs("--listen", "127.0.0.1:0", "--token-file", tokFile), extra...)
	h.cmd = exec.Command(f.harness, args...)
	pr, pw := io.Pipe()
	h.cmd.Stderr = io.MultiWriter(h.stderr, pw)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.exited <- h.cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addr:
		h.url = "http://" + a + "/"
	case err := <-h.exited:
		t.Fatalf("the harness exited: %v\n%s", err, h.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("the harness did not listen:\n%s", h.stderr)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	})
	return h
}

// stop ends the server as its supervisor does (SIGTERM) and asserts a
// normal exit.
func (h *httpHarness) stop(t *testing.T) {
	t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-h.exited:
		if err != nil {
			t.Errorf("the harness ended with %v:\n%s", err, h.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the harness did not stop:\n%s", h.stderr)
	}
}
