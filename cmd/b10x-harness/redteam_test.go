package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRedteamNetNoneFlagWidenedByFile: the command line says --net none,
// which the docs say replaces the file's key; a policy file that sets only
// allow_domain (and allow_cidr) still gives the run child the proxy, and
// the child reaches a server on the harness host's loopback. `policy show`
// meanwhile reports net = "none" from the flag.
func TestRedteamNetNoneFlagWidenedByFile(t *testing.T) {
	testenv := atkExecution()
	if !testenv {
		t.Skip("no confined execution here")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
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
	b, _ := json.Marshal(map[string]any{"argv": []string{curl, "-s", "-m", "10", "--noproxy", "", "http://good.test:" + port + "/"}, "timeout_s": 20})
	cmd := harnessCommand("call", "--policy", pf, "--net", "none", "--workspace", ws, "--yes", "--allow-program", curl, "run", string(b))
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=good.test=127.0.0.1")
	r := runHarnessCmd(t, cmd, "")
	if hits.Load() > 0 || strings.Contains(r.stdout, "HOST-LOOPBACK-SECRET") {
		t.Errorf("--net none on the command line, and the run child reached the host's loopback through the proxy the file's allow_domain turned on:\n%s\n%s", r.stdout, r.stderr)
	}
}
