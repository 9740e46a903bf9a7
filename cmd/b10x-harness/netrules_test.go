package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/testenv"
)

// TestProxyRulesAlone: --allow-cidr alone turns the proxy on, as
// --allow-domain does (policy show says why; the program gets the proxy's
// address); --deny-domain alone is refused, naming the key, since the
// proxy admits only what an allow rule names.
func TestProxyRulesAlone(t *testing.T) {
	r := harness(t, "", "policy", "show", "--no-user-defaults", "--allow-cidr", "10.0.0.0/8")
	if r.code != 0 || !strings.Contains(r.stdout, `net = "proxy"`) || !strings.Contains(r.stdout, "allow_cidr (implies proxy)") {
		t.Errorf("policy show --allow-cidr: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ws, _ := sampleWorkspace(t)
	r = harness(t, "", "call", "--workspace", ws, "--deny-domain", "example.com", "dir_list", "{}")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--deny-domain example.com: without allow_domain or allow_cidr") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--deny-domain alone: exit %d, %q", r.code, r.stderr)
	}
	r = harness(t, "", "call", "--workspace", ws, "--allow-domain", "a.example", "--deny-domain", "b.a.example", "dir_list", "{}")
	if r.code != 0 {
		t.Errorf("--deny-domain beside --allow-domain: exit %d, %q", r.code, r.stderr)
	}
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	cmd := harnessCommand("exec", "--quiet", "--workspace", ws, "--allow-cidr", "127.0.0.0/8", "--", "sh", "-c", "echo $HTTPS_PROXY")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	r = runHarnessCmd(t, cmd, "")
	if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprintf("http://127.0.0.1:%d", egress.Port) {
		t.Errorf("exec --allow-cidr: exit %d, stdout %q, stderr %q; want the proxy's address", r.code, r.stdout, r.stderr)
	}
}
