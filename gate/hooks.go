package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/proc"
	"github.com/b10x/harness/tools"
)

// DefaultHookTimeout bounds a hook when Hook.Timeout is zero.
const DefaultHookTimeout = 10 * time.Second

// hookOutputCap bounds what is kept of a hook's stdout and stderr.
const hookOutputCap = 16 << 10

// Hook is a pre-call program (a hook setting). It runs without a shell, receives the
// resolved call as JSON on stdin and answers by exit status:
//
//   - 0: continue (optionally with a JSON decision on stdout, see below);
//   - 2: block; its stderr (trimmed, capped) is the reason the model sees;
//   - anything else, a crash, a timeout, or unreadable stdout: block (fail
//     closed), and the record says the hook failed.
//
// On exit 0 a hook may print {"decision":"allow"|"deny"|"ask","reason":...}:
// deny blocks; ask sends the call to the approver even at or below the
// ceiling; allow skips the approver. No answer can publish an unpublished
// tool or admit a path the write scope denies: those steps come first.
//
// Hooks are started by the harness and share its own write confinement.
// Their lifetime is bounded: when a hook ends, or times out, or the harness
// dies, everything the hook started is killed with it, setsid and
// double-forked daemons included (see hookinit.go).
type Hook struct {
	Argv    []string
	Timeout time.Duration // zero: DefaultHookTimeout
	Env     []string      // the hook's environment; nil: the harness's own
}

// ParseHook splits a hook command line into an argv, honouring single and
// double quotes and backslash escapes as a POSIX shell would, but without
// running a shell: no expansion, no redirection, no operators.
func ParseHook(s string) (Hook, error) {
	var argv []string
	var cur strings.Builder
	inArg, quote := false, rune(0)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			if r == '"' {
				quote = 0
			} else if r == '\\' && i < len(s) && strings.ContainsRune(`"\$`+"`", rune(s[i])) {
				cur.WriteByte(s[i])
				i++
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == '\\':
			if i < len(s) {
				r2, n2 := utf8.DecodeRuneInString(s[i:])
				cur.WriteRune(r2)
				i += n2
			}
			inArg = true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				argv = append(argv, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 {
		return Hook{}, fmt.Errorf("hook %q: unterminated %c quote", s, quote)
	}
	if inArg {
		argv = append(argv, cur.String())
	}
	if len(argv) == 0 {
		return Hook{}, fmt.Errorf("hook %q: empty command", s)
	}
	if strings.ContainsRune(s, 0) {
		return Hook{}, fmt.Errorf("hook %q: NUL byte", s)
	}
	return Hook{Argv: argv}, nil
}

// hookInput is what a hook reads on stdin.
type hookInput struct {
	Entry     string        `json:"entry"`
	Operation string        `json:"operation"`
	Risk      string        `json:"risk"`
	Arguments any           `json:"arguments"`
	Writes    []tools.Write `json:"writes,omitempty"`
	Workspace string        `json:"workspace"`
	Surface   string        `json:"surface"`
	Via       string        `json:"via,omitempty"`
}

type hookAnswer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// hookVerdict is the combined answer of all hooks.
type hookVerdict int

const (
	hookContinue hookVerdict = iota
	hookAllow
	hookAsk
)

type capped struct {
	buf bytes.Buffer
	n   int
}

// hookPIDNamespace reports whether hooks get a PID namespace of their own:
// where creating one needs no user namespace (the harness is root holding
// CAP_SYS_ADMIN; a root in a container usually lacks it). A user namespace
// would change who the hook is; without one the hook init bounds the hook
// as a subreaper. Tests replace it.
var hookPIDNamespace = func() bool {
	if os.Geteuid() != 0 {
		return false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_ADMIN/32].Effective&(1<<(unix.CAP_SYS_ADMIN%32)) != 0
}

// HooksHavePIDNamespace reports whether this process's hooks run as PID 1
// of a namespace of their own. When they do not, their init finds what
// they left behind by reading /proc (a caller that confines its own reads
// must leave /proc readable for it).
func HooksHavePIDNamespace() bool { return hookPIDNamespace() }

func (c *capped) Write(p []byte) (int, error) {
	c.n += len(p)
	if room := hookOutputCap - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// runHook runs one hook with the call (in) on its stdin, to its end or
// its timeout, and returns what it wrote (capped) and how it ended. The
// hook runs under the hook init (internal/proc): when the hook ends, at
// the timeout, and when the harness dies (even by SIGKILL), everything it
// started is killed with it, setsid and double-forked daemons included:
// nothing a hook started outlives its verdict.
func (g *Gate) runHook(ctx context.Context, h Hook, in []byte, timeout time.Duration) (stdout, stderr capped, runErr error, timedOut bool) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := func(pidns bool) (*exec.Cmd, error) {
		stdout, stderr = capped{}, capped{}
		cmd := proc.HookCommand(h.Argv, h.Env, pidns)
		cmd.Dir = g.cfg.Workspace.Dir()
		cmd.Stdin = bytes.NewReader(in)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd, cmd.Start()
	}
	cmd, runErr := start(hookPIDNamespace())
	if runErr != nil && hookPIDNamespace() {
		// No PID namespace after all (a container's seccomp profile):
		// the init bounds the hook as a subreaper instead.
		cmd, runErr = start(false)
	}
	if runErr == nil {
		// At the timeout (or the caller's cancel) the init ends the
		// hook's tree; a second later it is killed if it has not.
		stop := context.AfterFunc(hctx, func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			time.AfterFunc(time.Second, func() { _ = cmd.Process.Kill() })
		})
		runErr = cmd.Wait()
		stop()
	}
	return stdout, stderr, runErr, hctx.Err() != nil
}

// runHooks runs every hook in order. It returns refused=true with the
// outcome when one blocks.
func (g *Gate) runHooks(ctx context.Context, req Request, rec *CallRecord) (hookVerdict, Outcome, bool) {
	verdict := hookContinue
	if len(g.cfg.Hooks) == 0 {
		return verdict, Outcome{}, false
	}
	in, err := json.Marshal(hookInput{
		Entry: req.Entry.Name, Operation: req.Entry.Operation, Risk: req.Entry.Risk.String(),
		Arguments: req.Args, Writes: req.Writes, Workspace: g.cfg.Workspace.Dir(), Surface: req.Surface, Via: req.Via,
	})
	if err != nil {
		in = nil
	}
	for i, h := range g.cfg.Hooks {
		name := fmt.Sprintf("hook %d (%s)", i+1, h.Argv[0])
		block := func(detail, public string) (hookVerdict, Outcome, bool) {
			rec.Steps = append(rec.Steps, StepVerdict{Step: "hooks", Verdict: "refuse", Detail: name + ": " + detail})
			return verdict, Outcome{Status: Refused, Reason: tools.ReasonHookBlocked, Message: public}, true
		}
		if in == nil {
			return block("arguments could not be encoded: "+err.Error(), name+" could not be given the call; blocked")
		}
		timeout := h.Timeout
		if timeout <= 0 {
			timeout = DefaultHookTimeout
		}
		stdout, stderr, runErr, timedOut := g.runHook(ctx, h, in, timeout)
		reason := strings.TrimSpace(strings.ToValidUTF8(stderr.buf.String(), "\uFFFD"))
		if len(reason) > 1000 {
			reason = reason[:1000] + "…"
		}
		var ee *exec.ExitError
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			rec.Steps = append(rec.Steps, StepVerdict{Step: "hooks", Verdict: "refuse", Detail: name + ": stopped: the call was cancelled"})
			return verdict, Outcome{Status: Refused, Reason: tools.ReasonCancelled, Message: "the call was cancelled while " + name + " ran; it did not run"}, true
		case timedOut:
			return block(fmt.Sprintf("failed: timed out after %s", timeout), name+" timed out; the call is blocked")
		case runErr == nil:
		case errors.As(runErr, &ee) && ee.ExitCode() == 2:
			if reason == "" {
				reason = "no reason given"
			}
			return block("exit 2: "+reason, "blocked by "+name+": "+reason)
		default:
			return block("failed: "+runErr.Error()+"; stderr: "+reason, name+" failed; the call is blocked")
		}
		out := bytes.TrimSpace(stdout.buf.Bytes())
		if len(out) == 0 {
			rec.Steps = append(rec.Steps, StepVerdict{Step: "hooks", Verdict: "pass", Detail: name + ": exit 0"})
			continue
		}
		var a hookAnswer
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if stdout.n > hookOutputCap || dec.Decode(&a) != nil || dec.More() {
			return block("failed: stdout is not a decision object", name+" answered with something that is not a decision; the call is blocked")
		}
		switch a.Decision {
		case "deny":
			r := a.Reason
			if r == "" {
				r = "no reason given"
			}
			return block("deny: "+r, "blocked by "+name+": "+r)
		case "ask":
			verdict = hookAsk
		case "allow":
			if verdict != hookAsk {
				verdict = hookAllow
			}
		default:
			return block(fmt.Sprintf("failed: unknown decision %q", a.Decision), name+" answered with an unknown decision; the call is blocked")
		}
		rec.Steps = append(rec.Steps, StepVerdict{Step: "hooks", Verdict: "pass", Detail: name + ": " + a.Decision + " " + a.Reason})
	}
	return verdict, Outcome{}, false
}
