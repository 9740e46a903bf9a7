package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/workspace"
)

// Programs maps each allow_program declaration (a name or an absolute path,
// exactly as declared) to the file it resolved to at start, pinned (see
// spawn.PinProgram): its canonical path and the identity of the file found
// there, held open for the life of the process. A call's argv[0] must equal
// a key; the value is what is executed, by descriptor, so neither a file
// planted later in the workspace or on PATH nor a link swapped in at the
// pinned path is ever run (docs/decisions/0071-programs-pinned.md).
type Programs map[string]spawn.Pinned

// ErrProgramNotFound and ErrProgramNotExecutable are what ResolvePrograms
// errors match (errors.Is) when a declaration names no file, or a file that
// is not a regular executable one: a command line maps them to 127 and 126,
// as env(1) and docker do.
var (
	ErrProgramNotFound      = errors.New("not found")
	ErrProgramNotExecutable = errors.New("not an executable file")
)

// programErr is an error worded as msg that matches kind.
type programErr struct {
	msg  string
	kind error
}

func (e programErr) Error() string        { return e.msg }
func (e programErr) Is(target error) bool { return target == e.kind }

// ResolvePrograms resolves declarations once, through path (the harness's
// PATH) for names, to canonical absolute paths of regular executable files,
// and pins each. A symbolic link met while resolving, that lies in the
// workspace or beneath an allow_write path of view (where a run child of an
// earlier process may have planted it), is refused as PinRunView refuses
// one; a zero view has no such areas. A declaration that does not resolve
// is an error naming it.
func ResolvePrograms(decls []string, path string, view RunView) (Programs, error) {
	var areas []string
	if view.Workspace.Path != "" {
		areas = append(areas, view.Workspace.Path)
	}
	for _, w := range view.Write {
		areas = append(areas, w.Path)
	}
	p := Programs{}
	for _, d := range decls {
		if d == "" || strings.ContainsRune(d, 0) {
			return nil, setting.Errorf(setting.AllowProgram, d, "empty or NUL")
		}
		var file string
		switch {
		case filepath.IsAbs(d):
			file = d
		case strings.ContainsRune(d, '/'):
			return nil, setting.Errorf(setting.AllowProgram, d, "give a program name or an absolute path")
		default:
			f, err := lookPath(d, path)
			if err != nil {
				return nil, &setting.Error{Key: setting.AllowProgram, Value: setting.Quote(d), Err: programErr{"not found in PATH", ErrProgramNotFound}}
			}
			file = f
		}
		canon, err := resolveUnplanted(file, areas)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &setting.Error{Key: setting.AllowProgram, Value: setting.Quote(d), Err: programErr{err.Error(), ErrProgramNotFound}}
		}
		if err != nil {
			return nil, setting.Errorf(setting.AllowProgram, d, "%v", err)
		}
		st, err := os.Stat(canon)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return nil, &setting.Error{Key: setting.AllowProgram, Value: setting.Quote(d), Err: programErr{canon + " is not an executable file", ErrProgramNotExecutable}}
		}
		pinned, err := spawn.PinProgram(canon)
		if err != nil {
			return nil, setting.Errorf(setting.AllowProgram, d, "%s", refusal(err))
		}
		if pinned.Path != canon {
			return nil, setting.Errorf(setting.AllowProgram, d, "changed while it was resolved (%s, then %s)", canon, pinned.Path)
		}
		if err := checkOutsideView(canon, view); err != nil {
			return nil, setting.Errorf(setting.AllowProgram, d, "%v", err)
		}
		p[d] = pinned
	}
	return p, nil
}

func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never resolve through the current directory
		}
		f := filepath.Join(dir, name)
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return f, nil
		}
	}
	return "", exec.ErrNotFound
}

// Names lists the declarations, sorted.
func (p Programs) Names() []string {
	n := make([]string, 0, len(p))
	for k := range p {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// RunView is what a run child sees of the host besides the system
// directories: the workspace and the extra paths, each pinned once, at
// start (see spawn.Pinned). Get one from PinRunView.
type RunView struct {
	Workspace   spawn.Pinned
	Read, Write []spawn.Pinned
}

// PinRunView pins the workspace (a directory) and the allow_read and
// allow_write paths, once: each is made absolute, its symbolic links are
// evaluated and the file found is held open for the life of the process,
// so that a child cannot make a later call of this process bind something
// else at that path (docs/decisions/0035-pinned-view-paths.md).
//
// A later process resolves the paths again, so links a child of an earlier
// one left are not followed where a child could have planted them: a
// symbolic link met while resolving a path, that lies in the workspace or
// beneath an allow_write path, makes PinRunView fail.
//
// It refuses, with a one-line error naming the setting and the path (a
// *setting.Error): a path that does not exist (or cannot be in a child's
// view: "/", /proc, /dev), a path inside the workspace or equal to it (run
// calls may already read and write there), a path named twice (in either list, also as another
// spelling of the same file), and a path resolved through such a planted
// link. Paths that hold the workspace or each other are allowed.
func PinRunView(workspace string, read, write []string) (RunView, error) {
	why := func(err error) string {
		if errors.Is(err, fs.ErrNotExist) {
			return "does not exist"
		}
		return refusal(err)
	}
	// Where a run child may write: the workspace and the write paths as
	// they resolve now. A link found there while resolving is refused.
	var areas []string
	for _, p := range append([]string{workspace}, write...) {
		if c, err := filepath.EvalSymlinks(p); err == nil {
			if c, err = filepath.Abs(c); err == nil {
				areas = append(areas, c)
			}
		}
	}
	// A path is said as given, unquoted, as a command line shows it.
	pin := func(key, p string) (spawn.Pinned, error) {
		c, err := resolveUnplanted(p, areas)
		if err != nil {
			return spawn.Pinned{}, &setting.Error{Key: key, Value: p, Err: errors.New(why(err))}
		}
		pp, err := spawn.Pin(c)
		if err != nil {
			return spawn.Pinned{}, &setting.Error{Key: key, Value: p, Err: errors.New(why(err))}
		}
		if pp.Path != c {
			return spawn.Pinned{}, setting.Errorf(key, p, "changed while it was resolved (%s, then %s)", c, pp.Path)
		}
		return pp, nil
	}
	var v RunView
	ws, err := pin(setting.Workspace, workspace)
	if err != nil {
		return v, err
	}
	if !ws.Dir {
		return v, setting.Errorf(setting.Workspace, workspace, "not a directory")
	}
	v.Workspace = ws
	seen := map[spawn.Pinned]string{}
	for _, l := range []struct {
		key   string
		paths []string
		out   *[]spawn.Pinned
	}{{setting.AllowRead, read, &v.Read}, {setting.AllowWrite, write, &v.Write}} {
		for _, p := range l.paths {
			abs, err := filepath.Abs(p)
			if err == nil && (within(abs, ws.Path) || within(abs, workspace)) {
				return RunView{}, &setting.Error{Key: l.key, Value: p, Err: fmt.Errorf("inside the workspace %s, where run calls may already read and write; drop it", ws.Path)}
			}
			pp, err := pin(l.key, p)
			if err != nil {
				return RunView{}, err
			}
			if within(pp.Path, ws.Path) || pp.Dev == ws.Dev && pp.Ino == ws.Ino {
				return RunView{}, &setting.Error{Key: l.key, Value: p, Err: fmt.Errorf("inside the workspace %s, where run calls may already read and write; drop it", ws.Path)}
			}
			for q, named := range seen {
				if q.Path == pp.Path || q.Dev == pp.Dev && q.Ino == pp.Ino {
					return RunView{}, setting.Errorf(l.key, p, "named twice (also as %s); name it once", named)
				}
			}
			seen[pp] = fmt.Sprintf("%s %q", l.key, p)
			*l.out = append(*l.out, pp)
		}
	}
	return v, nil
}

// refusal is a spawn refusal in a setting's words: what was refused,
// without the package that refused it.
func refusal(err error) string {
	if e, ok := err.(*spawn.Error); ok {
		return e.Err.Error()
	}
	return err.Error()
}

// within reports whether p is dir or beneath it, component-wise (both
// clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// maxLinks bounds the symbolic links resolveUnplanted follows, as the
// kernel's own MAXSYMLINKS does.
const maxLinks = 40

// resolveUnplanted is filepath.EvalSymlinks of the absolute p, one component
// at a time, except that a symbolic link lying within one of areas (where
// a run child may have planted it) is an error naming it.
func resolveUnplanted(p string, areas []string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := strings.Split(abs, "/")
	resolved := "/"
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		for _, a := range areas {
			if within(next, a) {
				return "", fmt.Errorf("resolves through the symbolic link %s, inside %s where run calls may write (one may have planted it); name its target instead", next, a)
			}
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many symbolic links at %s", next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// RunConfig configures the run tool. Runner and View are required.
type RunConfig struct {
	Programs Programs
	Runner   spawn.Runner
	Env      []string      // the complete environment of every child (already scrubbed)
	Timeout  time.Duration // per call; the model's timeout_s may only lower it; 0: 2 minutes
	// Grace is how long a cancelled call's program has after SIGTERM
	// before its tree is killed (spawn.Spec.Grace); 0: killed at once.
	Grace  time.Duration
	Limits cgroup.Limits
	// NProc is each program's RLIMIT_NPROC (spawn.Spec.NProc), for calls
	// without a cgroup leaf; 0: none.
	NProc   uint64
	TmpSize int64 // cap of each of the child's /tmp and /dev/shm; 0: spawn.DefaultTmpSize
	Net     bool
	// CallerIDs runs each program as the host ids it is inside its user
	// namespace, not as root of it (spawn.Spec.CallerIDs).
	CallerIDs bool
	// Egress, when not nil, gives each call a proxy that reaches what it
	// admits (package egress): the call's network namespace is empty but
	// for the proxy's listener at 127.0.0.1:egress.Port, and the child's
	// environment names it. Net must be false.
	Egress    *egress.Policy
	View      RunView // the workspace (the one given to Prepare) and the extra paths
	MaxOutput int     // per stream; 0: 64 KiB
	MaxStdin  int     // 0: 1 MiB
	// Held is what the description tells the model about the paths the
	// gate holds from the program (gate.RunHeldSummary); "" says nothing.
	Held string
	// Sockets is what the description tells the model about Unix sockets
	// (spawn.PathnameSockets); "" says nothing.
	Sockets string
	// Denials reads the kernel's audit records of the calls' Landlock
	// denials, where audit.Probe says they are attributable; nil: each
	// call says why they are not (KernelDenials). The seccomp filter's
	// refusals come in each call's spawn.Result and need no reader.
	Denials *audit.Reader
	// MaxDenials is how many of a call's denials are listed and recorded
	// one by one; the rest are counted (0: DefaultMaxDenials).
	MaxDenials int
}

// RunTool returns the run tool.
func RunTool(cfg RunConfig) Tool {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 64 << 10
	}
	if cfg.MaxStdin <= 0 {
		cfg.MaxStdin = 1 << 20
	}
	return &runTool{cfg: cfg}
}

type runTool struct{ cfg RunConfig }

// RunArgs are the run tool's arguments.
type RunArgs struct {
	Argv     []string `json:"argv" min:"1" desc:"The program and its arguments, passed to execve as they are (no shell). argv[0] must be one of the allowed programs."`
	Cwd      string   `json:"cwd,omitempty" max:"16384" desc:"Working directory, relative to the workspace root (default: the root)."`
	Stdin    string   `json:"stdin,omitempty" desc:"Text given to the program on standard input."`
	TimeoutS int      `json:"timeout_s,omitempty" desc:"Wall-clock limit in seconds; may only lower the harness's limit." min:"1"`
}

func (t *runTool) Name() string { return "run" }

func (t *runTool) Description() string {
	names := t.cfg.Programs.Names()
	return "Run a program in the workspace inside a sandbox: fresh namespaces, no network unless allowed, " +
		"writes only in the workspace and a private /tmp, and the whole process tree is killed when the program " +
		"exits or the time limit passes. argv is passed as is, without a shell. Allowed programs (argv[0]): " +
		strings.Join(names, ", ") + ". The result gives the exit status, stdout and stderr (each capped, head and tail kept). " +
		t.cfg.netText() + " " + strings.TrimSpace(t.cfg.Held+" "+t.cfg.Sockets+t.cfg.denialsText())
}

// denialsText tells the model, where the calls' kernel denials are
// attributed, that the result lists them.
func (cfg RunConfig) denialsText() string {
	text := ""
	switch {
	case cfg.Denials != nil:
		text = " What the sandbox refused the program (a file it may not read or write, say) is listed after the output, one line each."
	case spawn.ProbeSeccompDenials().Attributable:
		text = " The system calls the sandbox refused the program (mount, say) are listed after the output, one line each."
	}
	text += " The masked files it reads (secrets of /etc and the files the read scope denies, which read as empty) are listed after the output, once each; a write to a file it may not write fails (EROFS or EACCES) and is not listed."
	if !cfg.Net {
		text += " Connections it tries to addresses outside the call's network (refused: no route, ENETUNREACH) are counted after the output."
	}
	return text
}

var runSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(RunArgs{}) })

func (t *runTool) Schema() json.RawMessage { return runSpec().schema }

func (t *runTool) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a RunArgs
	if _, err := runSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	if len(a.Argv) == 0 {
		return nil, Errorf(ReasonInvalidArgument, nil, "argv must hold at least the program")
	}
	for i, s := range a.Argv {
		if strings.ContainsRune(s, 0) {
			return nil, Errorf(ReasonInvalidArgument, nil, "argv[%d] holds a NUL byte", i)
		}
	}
	prog, ok := t.cfg.Programs[a.Argv[0]]
	if !ok {
		return nil, Errorf(ReasonProgramNotAllowed, nil, "program %q is not allowed; allowed: %s", a.Argv[0], strings.Join(t.cfg.Programs.Names(), ", "))
	}
	if err := prog.Current(); err != nil {
		// Checked again, in the view, at the moment it is executed; this
		// says it early, as a refusal.
		return nil, Errorf(ReasonProgramNotAllowed, err, "program %q is no longer the file allowed at start: it was moved, replaced or made a link since (allowed programs are pinned when the harness starts; restart it to allow what is there now)", a.Argv[0])
	}
	if len(a.Stdin) > t.cfg.MaxStdin {
		return nil, Errorf(ReasonInvalidArgument, nil, "stdin is %d bytes, above the %d-byte limit", len(a.Stdin), t.cfg.MaxStdin)
	}
	if a.TimeoutS < 0 {
		return nil, Errorf(ReasonInvalidArgument, nil, "timeout_s must be positive")
	}
	cwd := "."
	if a.Cwd != "" {
		rel, err := ws.Resolve(a.Cwd)
		if err != nil {
			return nil, fromWorkspace(err)
		}
		cwd = rel
	}
	dir := filepath.Join(ws.Dir(), cwd)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, Errorf(ReasonInvalidArgument, err, "cwd %q is not a directory", a.Cwd)
	}
	timeout := t.cfg.Timeout
	if a.TimeoutS > 0 && time.Duration(a.TimeoutS)*time.Second < timeout {
		timeout = time.Duration(a.TimeoutS) * time.Second
	}
	if t.cfg.View.Workspace.Path != ws.Dir() {
		return nil, Errorf(ReasonToolError, nil, "bug: the run tool was configured for workspace %q, called for %q", t.cfg.View.Workspace.Path, ws.Dir())
	}
	return &runCall{t: t, args: a, spec: t.cfg.spec(prog, a.Argv, dir, timeout), cwd: cwd}, nil
}

// spec is the Spec of one call of the tool cfg describes. The program
// needs no entry of its own: spawn shows it to the child read-only when no
// directory of the view holds it.
func (cfg RunConfig) spec(prog spawn.Pinned, argv []string, dir string, timeout time.Duration) spawn.Spec {
	s := spawn.Spec{
		Program: prog, Argv: argv, Env: cfg.Env, Dir: dir, Workspace: cfg.View.Workspace,
		ReadPaths: cfg.View.Read, WritePaths: cfg.View.Write, Net: cfg.Net, Limits: cfg.Limits, Timeout: timeout, Grace: cfg.Grace,
		TmpSize: cfg.TmpSize, CallerIDs: cfg.CallerIDs, NProc: cfg.NProc,
	}
	if cfg.Egress != nil {
		s.ProxyPort = egress.Port
		s.Env = egress.WithEnv(cfg.Env)
	}
	return s
}

type runCall struct {
	t    *runTool
	args RunArgs
	spec spawn.Spec
	cwd  string // canonical, relative to the workspace root
	// holdErr is the hold's refusal (Holder), which is Execute's error.
	holdErr error
}

// Preview implements Previewer: the program's resolved path and the
// working directory.
func (c *runCall) Preview() Preview { return Preview{Program: c.spec.Program.Path, Dir: c.cwd} }

func (c *runCall) Args() any { return c.args }

// Hold makes the child see the paths read returns held (see Holder): the
// runner reads them in its quiet turn (spawn.Spec.Hold), and calls after
// in another once the call has ended (spawn.Spec.After).
func (c *runCall) Hold(read func() (Hold, error), after func()) {
	c.spec.After = after
	ws := c.spec.Workspace.Path
	c.spec.Hold = func() (spawn.Held, error) {
		h, err := read()
		if err != nil {
			c.holdErr = err
			return spawn.Held{}, err
		}
		held := spawn.Held{ReadOnly: holdPaths(ws, h.ReadOnly), Anchored: holdPaths(ws, h.Anchored), Masked: holdPaths(ws, h.Masked), After: h.CheckAfter}
		if len(h.IDs) > 0 {
			held.IDs = make(map[string]spawn.FileID, len(h.IDs))
			for rel, id := range h.IDs {
				held.IDs[holdPaths(ws, []string{rel})[0]] = spawn.FileID{Dev: id.Dev, Ino: id.Ino}
			}
		}
		return held, nil
	}
}
func (c *runCall) Writes() []Write { return nil }

func (c *runCall) Execute(ctx context.Context, rep Report) (Result, error) {
	var ch *egress.Channel
	if c.t.cfg.Egress != nil {
		var err error
		var report func(egress.Event)
		if rep.Connection != nil {
			report = func(e egress.Event) { rep.Connection(record.NetLine(0, e)) }
		}
		if ch, err = egress.NewChannel(c.t.cfg.Egress, egress.Options{Report: report}); err != nil {
			return Result{}, Errorf(ReasonToolError, err, "the sandbox's proxy could not be set up; the program did not run")
		}
	}
	res, out, errOut, err := runCaptured(ctx, c.t.cfg.Runner, c.spec, strings.NewReader(c.args.Stdin), c.t.cfg.MaxOutput, ch, rep.Progress)
	meta := runMeta(res)
	meta["stdout_bytes"], meta["stderr_bytes"] = out.Total(), errOut.Total()
	deniedByKernel := ""
	reader := c.t.cfg.Denials
	if res.DomainName == "" {
		reader = nil
	}
	if lines, text, count, ok := CollectDenials(reader, res, c.t.cfg.MaxDenials); ok {
		for _, l := range lines {
			if rep.Denial != nil {
				rep.Denial(l)
			}
		}
		meta["kernel_denials"], deniedByKernel = count, text
		if note := partialDenialsNote(reader != nil, res.SeccompAttributed, res.NoRouteCounted, res.MaskedWatched); note != "" {
			meta["kernel_denials_note"] = note
		}
	} else {
		meta["kernel_denials"] = kernelDenialsNote(audit.Probe())
	}
	var denied []egress.Event
	if ch != nil {
		// Every connection of the call ends with it.
		denied = ch.Close()
		meta["net_denied"] = len(denied)
	}
	if c.holdErr != nil {
		return Result{Meta: meta}, c.holdErr
	}
	if err != nil {
		var se *spawn.SetupError
		if errors.As(err, &se) {
			if spawn.ProcRefused(err) {
				// The host's fault, not the call's: say what to change.
				return Result{Meta: meta}, Errorf(ReasonToolError, err, "the sandbox could not be set up (step %s); the program did not run: %s", se.Step, spawn.ProcHint)
			}
			if strings.HasPrefix(se.Step, "program ") {
				// The sandbox found the program's path no longer the
				// file pinned (swapped after Prepare checked it).
				return Result{Meta: meta}, Errorf(ReasonProgramNotAllowed, err, "program %q is no longer the file allowed at start: it was moved, replaced or made a link since; the program did not run (allowed programs are pinned when the harness starts; restart it to allow what is there now)", c.args.Argv[0])
			}
			return Result{Meta: meta}, Errorf(ReasonToolError, err, "the sandbox could not be set up (step %s); the program did not run", se.Step)
		}
		return Result{Meta: meta}, Errorf(ReasonToolError, err, "the program could not be run")
	}
	text := formatRun(res, out, errOut) + deniedByKernel + deniedText(denied)
	switch {
	case res.TimedOut:
		return Result{Text: text, Meta: meta}, Errorf(ReasonTimeout, nil, "the program was killed at its time limit (%s), with its whole process tree\n%s", c.spec.Timeout, text)
	case res.OOMKilled:
		return Result{Text: text, Meta: meta}, Errorf(ReasonToolError, nil, "the program ran out of memory (memory.max) and was killed\n%s", text)
	}
	return Result{Text: text, Meta: meta}, nil
}

// RunCaptured runs spec through r, feeding stdin and capturing stdout and
// stderr, each bounded to max bytes (head and tail kept). A progress that
// is not nil is told the output's size as it arrives (Report.Progress).
func RunCaptured(ctx context.Context, r spawn.Runner, spec spawn.Spec, stdin io.Reader, max int, progress func(outBytes int64)) (spawn.Result, *spawn.Capture, *spawn.Capture, error) {
	return runCaptured(ctx, r, spec, stdin, max, nil, progress)
}

// runCaptured is RunCaptured with the call's proxy channel (nil: none).
func runCaptured(ctx context.Context, r spawn.Runner, spec spawn.Spec, stdin io.Reader, max int, ch *egress.Channel, progress func(int64)) (spawn.Result, *spawn.Capture, *spawn.Capture, error) {
	out, errOut := spawn.NewCapture(max), spawn.NewCapture(max)
	inR, inW, err := os.Pipe()
	if err != nil {
		return spawn.Result{}, out, errOut, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return spawn.Result{}, out, errOut, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return spawn.Result{}, out, errOut, err
	}
	var outW2, errW2 io.Writer = out, errOut
	if progress != nil {
		var total atomic.Int64
		outW2, errW2 = progressWriter{out, &total, progress}, progressWriter{errOut, &total, progress}
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); io.Copy(inW, stdin); inW.Close() }()
	go func() { defer wg.Done(); io.Copy(outW2, outR); outR.Close() }()
	go func() { defer wg.Done(); io.Copy(errW2, errR); errR.Close() }()
	stdio := spawn.Stdio{Stdin: inR, Stdout: outW, Stderr: errW}
	if ch != nil {
		stdio.Proxy = ch.Child()
	}
	res, runErr := r.Run(ctx, spec, stdio)
	inR.Close()
	outW.Close()
	errW.Close()
	wg.Wait()
	return res, out, errOut, runErr
}

// progressWriter counts what it passes on to w into total and reports it.
type progressWriter struct {
	w     io.Writer
	total *atomic.Int64
	fn    func(int64)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.fn(p.total.Add(int64(n)))
	return n, err
}

// runMeta is the structured outcome of a run call, for the record and the
// CLI: what happened and which layers confined it.
func runMeta(res spawn.Result) map[string]any {
	m := map[string]any{
		"exit_code":   res.ExitCode,
		"timed_out":   res.TimedOut,
		"oom_killed":  res.OOMKilled,
		"duration_ms": res.Duration.Milliseconds(),
		"layers":      res.Layers,
	}
	if res.Signal != "" {
		m["signal"] = res.Signal
	}
	if res.MemoryPeak >= 0 {
		m["memory_peak_bytes"] = res.MemoryPeak
	}
	if res.PidsPeak >= 0 {
		m["pids_peak"] = res.PidsPeak
	}
	if res.Prestarted {
		m["prestarted"] = true
	}
	return m
}

func formatRun(res spawn.Result, out, errOut *spawn.Capture) string {
	var b strings.Builder
	if res.Signal != "" {
		fmt.Fprintf(&b, "killed by %s", res.Signal)
	} else {
		fmt.Fprintf(&b, "exit status %d", res.ExitCode)
	}
	fmt.Fprintf(&b, " (%d ms)\n", res.Duration.Milliseconds())
	fmt.Fprintf(&b, "--- stdout (%d bytes) ---\n%s", out.Total(), out.Bytes())
	if n := len(out.Bytes()); n > 0 && out.Bytes()[n-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "--- stderr (%d bytes) ---\n%s", errOut.Total(), errOut.Bytes())
	return b.String()
}

// KernelDenials is what doctor says in one line about Landlock's
// denials inside run children here: attributed to each call, or why not
// (the other layers' have lines of their own: SeccompDenials,
// NoRouteDenials, MaskedOpens).
func KernelDenials() string {
	s := audit.Probe()
	if !s.Attributable {
		return "Landlock's are not attributable here (" + s.Why + "); the other layers' are said below"
	}
	return "attributed to each run call: Landlock's audit records are read from the audit netlink's read-only group (CAP_AUDIT_READ), listed in the call's result and recorded as denial lines"
}

// SeccompDenials is what doctor says in one line about the system calls
// run children's seccomp filter refuses: attributed to each call, or why
// not (decision 0090).
func SeccompDenials() string {
	s := spawn.ProbeSeccompDenials()
	if !s.Attributable {
		return "not attributable here (" + s.Why + ")"
	}
	return "attributed to each run call: the filter hands each call it refuses to the call's init (a seccomp user notification, answered EPERM), listed in the call's result and recorded as denial lines"
}

// NoRouteDenials is what doctor says in one line about the connections
// run children try to addresses outside their network namespace (decision
// 0093).
func NoRouteDenials() string {
	return "counted for each run call with a network namespace of its own (net none or proxy): each connection or datagram to an address outside it is refused with ENETUNREACH and recorded as a denial line of layer netns (net.no_route), read from the namespace's own IP counters by the call's init (a call whose counters could not be read says so); the kernel keeps no destination"
}

// ViewWrites is what doctor says in one line about a run child's writes
// outside the paths it may write: refused where no layer that reports
// sees them.
func ViewWrites() string {
	return "refused before any layer that reports sees them, by the view's read-only binds (EROFS) or the files' owners (EACCES); not listed per call, here or anywhere"
}

// MaskedOpens is what doctor says in one line about the masked files run
// children open (decision 0095).
func MaskedOpens() string {
	return "attributed to each run call: each masked file (read as empty) is an empty file of the call's own, whose access time the call's init reads when the program ends; each one the program reads is listed in the call's result once and recorded as a denial line of layer view (fs.read_file, the path); an open without a read is not, nor a masked directory's listing, and where the harness is not root the program owns those files and could hide a read"
}

// partialDenialsNote says which layers' denials a call with some
// attributed could not have: Landlock's (no reader, or no named domain),
// seccomp's, the network namespace's (the host's network, or its counters
// unread), the view's (its masked files not examined); "" when
// every layer's were.
func partialDenialsNote(landlock, seccomp, netns, view bool) string {
	var missing []string
	if !landlock {
		s := audit.Probe()
		why := s.Why
		if s.Attributable {
			why = "this run tool was given no audit reader, or the sandbox's domain logs nothing"
		}
		missing = append(missing, "Landlock's denials are not attributable here ("+why+")")
	}
	if !seccomp {
		why := spawn.ProbeSeccompDenials().Why
		if why == "" {
			why = "the harness's own seccomp filter stack holds a listener already"
		}
		missing = append(missing, "seccomp's refusals are not attributable here ("+why+")")
	}
	if !netns {
		missing = append(missing, "the network namespace's no-route refusals are not counted (the call has the host's network, or its network namespace's counters could not be read)")
	}
	if !view {
		missing = append(missing, "the masked files the program read are not known (the call's init could not examine them)")
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, "; ") + "; the other layers' are listed"
}

// kernelDenialsNote is what a run call without an audit reader says,
// once, about the denials the kernel made inside its child: why they are
// not attributable here (the kernel, its audit or the harness's
// privileges, decision 0080), or, where they would be, that this run
// tool was given no reader.
func kernelDenialsNote(s audit.Support) string {
	if !s.Attributable {
		return s.Note()
	}
	return "kernel denials are not attributable here (this host's kernel logs them, but this run tool was given no audit reader)"
}

// deniedText says, after a run's output, which connections the proxy
// refused and by what rule (the first few; the record holds them all).
func deniedText(denied []egress.Event) string {
	if len(denied) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nnetwork: %d connection attempt(s) denied by the harness's proxy:", len(denied))
	for i, e := range denied {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ... and %d more (see the run record)", len(denied)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s (%s)", egress.Destination(e.Host, e.Port), e.Rule)
	}
	return b.String()
}

// netText tells the model what a call's program can reach.
func (cfg RunConfig) netText() string {
	switch {
	case cfg.Net:
		return "Network: the host's network."
	case cfg.Egress == nil:
		return "Network: none (only the call's own loopback)."
	}
	var allow []string
	for _, p := range cfg.Egress.Allow {
		allow = append(allow, p.String())
	}
	for _, c := range cfg.Egress.CIDRs {
		allow = append(allow, c.String())
	}
	text := "Network: only through the harness's proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set; a program that ignores them reaches nothing), to: " + strings.Join(allow, ", ") + "."
	if len(cfg.Egress.Deny) > 0 {
		var deny []string
		for _, p := range cfg.Egress.Deny {
			deny = append(deny, p.String())
		}
		text += " Refused whatever else matches: " + strings.Join(deny, ", ") + "."
	}
	return text + " Every other destination is refused (HTTP 403 naming the rule)."
}
