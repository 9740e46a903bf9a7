package interop

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/mcp"
)

// docBlock is the fenced block that follows `<!-- interop:NAME -->` in
// docs/mcp.md: the client configurations the tests run are the documented
// ones.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	marker := "<!-- interop:" + name + " -->"
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("docs/mcp.md has no %s", marker)
	}
	s = s[i+len(marker):]
	open := strings.Index(s, "```")
	if open < 0 {
		t.Fatalf("docs/mcp.md: no block after %s", marker)
	}
	s = s[open:]
	s = s[strings.Index(s, "\n")+1:]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatalf("docs/mcp.md: the block after %s does not end", marker)
	}
	return s[:end]
}

// replace replaces old by new in s, failing the test when old is not there
// (the documented block changed shape: update the test with it).
func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the documented block has no %q:\n%s", old, s)
	}
	return strings.ReplaceAll(s, old, new)
}

// docServer rewrites a documented configuration to run this test's server
// through the tee: the binary is the test binary, whose first arguments
// make it the tee (log, the delay of the harness's first answer, the
// harness), and the harness gets this fixture's workspace, its record and
// extra arguments. quote renders one argument as the block's format does
// (JSON and TOML strings alike).
func (f *fixture) docServer(t *testing.T, block, log, delay string, extra ...string) string {
	t.Helper()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	block = replace(t, block, q("/usr/local/bin/b10x-harness"), q(self))
	args := []string{q(teeFlag), q(log), q(delay), q(f.harness), q("mcp"), q("--workspace"), q(f.ws), q("--record"), q(f.record)}
	for _, e := range extra {
		args = append(args, q(e))
	}
	return replace(t, block, `"mcp", "--workspace", "/path/to/project"`, strings.Join(args, ", "))
}

// message is a JSON-RPC message as the tee logged it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func messages(evs []wireEvent, dir string) []message {
	var ms []message
	for _, ev := range evs {
		if ev.Dir != dir || ev.Line == nil {
			continue
		}
		var m message
		if json.Unmarshal(ev.Line, &m) == nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// answer is the server's answer to the client's request id.
func answer(evs []wireEvent, id json.RawMessage) (message, bool) {
	for _, m := range messages(evs, "out") {
		if m.Method == "" && string(m.ID) == string(id) {
			return m, true
		}
	}
	return message{}, false
}

// handshake is what the tee saw of a session's start.
type handshake struct {
	discover        bool      // the client sent server/discover first
	discoverRefused bool      // and the harness answered it with an error
	discoverError   *rpcError // that error
	discoverVersion string    // the version server/discover asked for
	version         string    // the protocol version initialize settled on
	elicitation     bool      // the client declared the elicitation capability
	client          string    // clientInfo.name
}

func readHandshake(t *testing.T, evs []wireEvent) handshake {
	t.Helper()
	var h handshake
	for _, m := range messages(evs, "in") {
		switch m.Method {
		case "server/discover":
			h.discover = true
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &h.discoverVersion)
			a, ok := answer(evs, m.ID)
			h.discoverRefused = ok && a.Error != nil
			h.discoverError = a.Error
		case "initialize":
			var p struct {
				ProtocolVersion string                     `json:"protocolVersion"`
				Capabilities    map[string]json.RawMessage `json:"capabilities"`
				ClientInfo      struct{ Name string }      `json:"clientInfo"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatalf("initialize params: %v", err)
			}
			_, h.elicitation = p.Capabilities["elicitation"]
			h.client = p.ClientInfo.Name
			a, ok := answer(evs, m.ID)
			if !ok || a.Error != nil {
				t.Fatalf("initialize was not answered: %+v", a)
			}
			var r struct{ ProtocolVersion string }
			_ = json.Unmarshal(a.Result, &r)
			h.version = r.ProtocolVersion
			return h
		}
	}
	t.Fatalf("no initialize on the wire")
	return h
}

// checkWireResults asserts every tools/call answer on the wire has the
// shape decision 0078 gives it: one text block, no structuredContent, the
// outcome in _meta.
func checkWireResults(t *testing.T, evs []wireEvent) {
	t.Helper()
	n := 0
	for _, m := range messages(evs, "in") {
		if m.Method != "tools/call" {
			continue
		}
		a, ok := answer(evs, m.ID)
		if !ok {
			t.Errorf("tools/call %s was not answered", m.ID)
			continue
		}
		n++
		var r struct {
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
			StructuredContent json.RawMessage            `json:"structuredContent"`
			Meta              map[string]json.RawMessage `json:"_meta"`
			IsError           bool                       `json:"isError"`
		}
		if err := json.Unmarshal(a.Result, &r); err != nil {
			t.Errorf("tools/call %s: %v", m.ID, err)
			continue
		}
		var o mcp.Outcome
		if len(r.Content) != 1 || r.Content[0].Type != "text" || r.StructuredContent != nil || json.Unmarshal(r.Meta[mcp.OutcomeMeta], &o) != nil ||
			o.Status == "" || (o.Status != "executed") != r.IsError {
			t.Errorf("tools/call %s answered %s", m.ID, a.Result)
		}
	}
	if n == 0 {
		t.Errorf("no tools/call on the wire")
	}
}

// checkEnding asserts how the client ended its server: the first thing
// after the last message is the signal it sent (SIGINT, SIGTERM), or the
// end of stdin when signal is ""; and the harness exited 0, a normal end.
func checkEnding(t *testing.T, evs []wireEvent, signal string, orElse ...string) {
	t.Helper()
	first, exit := "", ""
	for _, ev := range evs {
		switch ev.Dir {
		case "signal", "eof":
			if first == "" {
				first = ev.Dir
				if ev.Dir == "signal" {
					first = ev.Text
				}
			}
		case "exit":
			exit = ev.Text
		}
	}
	want := signal
	if want == "" {
		want = "eof"
	}
	if (first != want && !slices.Contains(orElse, first)) || exit != "0" {
		t.Errorf("the client ended the session with %q and the harness exited %q; want %q (or %q) and 0", first, exit, want, orElse)
	}
}

var wallTime = regexp.MustCompile(`^Wall time: [0-9.]+ seconds\nOutput:\n`)

// checkDiscover asserts how the harness answered a server/discover at
// protocol 2026-07-28, which it does not speak: SEP-2575's
// UnsupportedProtocolVersionError (-32022), whose data lists the versions
// it speaks (the one initialize then settled on among them, none from
// 2026-07-28 on) and the one asked for.
func checkDiscover(t *testing.T, h handshake) {
	t.Helper()
	if !h.discover || h.discoverVersion != "2026-07-28" || h.discoverError == nil {
		t.Errorf("handshake: %+v; want server/discover at 2026-07-28, refused", h)
		return
	}
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	e := h.discoverError
	if err := json.Unmarshal(e.Data, &data); err != nil || e.Code != -32022 || e.Message != "unsupported protocol version" ||
		data.Requested != "2026-07-28" || !slices.Contains(data.Supported, h.version) ||
		slices.ContainsFunc(data.Supported, func(v string) bool { return v >= "2026-07-28" }) {
		t.Errorf("server/discover was answered %+v (data %s); want -32022 unsupported protocol version, supported holding %s and nothing from 2026-07-28, requested 2026-07-28", *e, e.Data, h.version)
	}
}
