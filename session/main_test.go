package session

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

// childEnv selects, in the test binary's environment, a scenario that runs
// in a re-run child of the test binary: Open confines the whole process,
// which must not be the test runner.
const childEnv = "B10X_SESSION_TEST_CHILD"

// children are the scenarios a child can run; each prints one JSON value
// on stdout.
var children = map[string]func() (any, error){}

func TestMain(m *testing.M) {
	reexec.Init()
	if name := os.Getenv(childEnv); name != "" {
		f, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no scenario %q\n", name)
			os.Exit(2)
		}
		v, err := f()
		if err != nil {
			fmt.Fprintln(os.Stderr, "scenario:", err)
			os.Exit(1)
		}
		if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// inChild runs scenario name in a re-run child with env, decoding what it
// prints into v.
func inChild(t testing.TB, name string, env []string, v any) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+name), env...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("scenario %s: %v\nstdout: %s\nstderr: %s", name, err, out, stderr)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("scenario %s printed %q: %v", name, out, err)
	}
}
