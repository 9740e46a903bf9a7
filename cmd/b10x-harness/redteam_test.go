package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestRedteamNetNoneFlagWidenedByFile: the command line says --net none,
// which the docs say replaces the file's key; a policy file that sets only
// allow_domain (and allow_cidr) still gives the run child the proxy, and
// the child reaches a server on the harness host's loopback. `policy show`
// meanwhile reports net = "none" from the flag.
func TestRedteamNetNoneFlagWidenedByFile(t *testing.T) {
	// The test binary's own client is the program: every VM shape has it.
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "HOST-LOOPBACK-SECRET")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	pf := filepath.Join(dir, "p.toml")
	os.WriteFile(pf, []byte("allow_domain = [\"good.test\"]\nallow_cidr = [\"127.0.0.1/32\"]\n"), 0o644)
	b, _ := json.Marshal(map[string]any{"argv": []string{self, netClientArg, "get", "http://good.test:" + port + "/"}, "timeout_s": 20})
	cmd := harnessCommand("call", "--policy", pf, "--net", "none", "--workspace", ws, "--yes", "--allow-program", self, "run", string(b))
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=good.test=127.0.0.1")
	r := runHarnessCmd(t, cmd, "")
	if hits.Load() > 0 || strings.Contains(r.stdout, "HOST-LOOPBACK-SECRET") {
		t.Errorf("--net none on the command line, and the run child reached the host's loopback through the proxy the file's allow_domain turned on:\n%s\n%s", r.stdout, r.stderr)
	}
	// Refused before anything starts, naming the contradiction.
	if r.code != exitUsage || !strings.Contains(r.stderr, "--net none: was given, and contradicts allow_domain") {
		t.Errorf("want exit 2 naming --net none and allow_domain; got %d:\n%s", r.code, r.stderr)
	}
}
