package spawn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFile waits until path exists, at most d.
func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGraceOnCancel: a call whose context ends gets SIGTERM through its
// init and Spec.Grace to end; a program that traps it cleans up and its own
// exit status is the result. Without a grace, or when the program ignores
// SIGTERM past it, the whole tree is killed.
func TestGraceOnCancel(t *testing.T) {
	for name, r := range runners(t) {
		for _, c := range []struct {
			what    string
			trap    string
			grace   time.Duration
			exit    int    // want, or -1
			signal  string // want, or ""
			cleaned bool
		}{
			{"trapped, with a grace", `trap 'echo cleaned > cleaned; exit 7' TERM`, 30 * time.Second, 7, "", true},
			{"no grace", `trap 'echo cleaned > cleaned; exit 7' TERM`, 0, -1, "SIGKILL", false},
			{"ignored past the grace", `trap '' TERM`, 300 * time.Millisecond, -1, "SIGKILL", false},
		} {
			ws := workspace(t)
			s := shSpec(t, ws, c.trap+"; touch ready; while :; do sleep 0.05; done")
			s.Grace = c.grace
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				waitFile(t, filepath.Join(ws, "ready"), 30*time.Second)
				cancel()
			}()
			start := time.Now()
			res, out, err := runCtx(ctx, t, r, s)
			took := time.Since(start)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %s: %v, want the context's end named\n%s", name, c.what, err, out)
			}
			if res.ExitCode != c.exit || res.Signal != c.signal {
				t.Errorf("%s: %s: exit %d signal %q, want %d %q\n%s", name, c.what, res.ExitCode, res.Signal, c.exit, c.signal, out)
			}
			_, cerr := os.Stat(filepath.Join(ws, "cleaned"))
			if (cerr == nil) != c.cleaned {
				t.Errorf("%s: %s: cleaned up %v, want %v", name, c.what, cerr == nil, c.cleaned)
			}
			if c.grace > 0 && c.grace < time.Second && took < c.grace {
				t.Errorf("%s: %s: ended after %v, before its grace %v", name, c.what, took, c.grace)
			}
		}
	}
}

// TestSignalsForwarded: signals sent on Stdio.Signals reach the program
// through its init; a call that handles them ends as it chooses.
func TestSignalsForwarded(t *testing.T) {
	for name, r := range runners(t) {
		if name == "broker" {
			continue // a broker's calls carry no Stdio.Signals (documented)
		}
		ws := workspace(t)
		s := shSpec(t, ws, `trap 'echo usr1 >> got' USR1; trap 'echo int >> got; exit 5' INT; touch ready; while :; do sleep 0.05; done`)
		sigs := make(chan os.Signal, 2)
		go func() {
			waitFile(t, filepath.Join(ws, "ready"), 30*time.Second)
			sigs <- syscall.SIGUSR1
			// The shell runs a trap between commands: SIGINT only once
			// the first trap has run, so the order is the test's.
			waitFile(t, filepath.Join(ws, "got"), 30*time.Second)
			sigs <- syscall.SIGINT
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, out, err := runCtx(ctx, t, signalling{r, sigs}, s)
		cancel()
		if err != nil || res.ExitCode != 5 {
			t.Errorf("%s: %v, exit %d; want exit 5 from the INT trap\n%s", name, err, res.ExitCode, out)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "got")); strings.TrimSpace(string(b)) != "usr1\nint" {
			t.Errorf("%s: the program saw %q, want usr1 then int", name, b)
		}
	}
}

// signalling is r with every call's Stdio.Signals set to sigs.
type signalling struct {
	Runner
	sigs <-chan os.Signal
}

func (r signalling) Run(ctx context.Context, s Spec, io Stdio) (Result, error) {
	io.Signals = r.sigs
	return r.Runner.Run(ctx, s, io)
}
