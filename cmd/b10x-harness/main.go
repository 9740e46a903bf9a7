// Command b10x-harness is a sandboxed executor: a model or a CI job acts on a
// workspace through seven tools, and every capability it is shown is one the
// kernel confines. See README.md.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/session"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses shared by every subcommand.
const (
	exitOK      = 0
	exitFailed  = 1 // the call ran and failed (call), or the command failed
	exitUsage   = 2 // usage or configuration error; nothing was done
	exitRefused = 3 // the gate refused the call (call)
)

// usageError is a configuration or usage error: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError carries a specific exit status out of a subcommand.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

type cli struct {
	Run    runCmd    `cmd:"" help:"Give a model (or a replay script) the published tools and execute its calls through the gate until it stops or a budget ends the run."`
	Tools  toolsCmd  `cmd:"" help:"Show the tools a model would be given, without contacting any provider."`
	Call   callCmd   `cmd:"" help:"Pass one tool call through the gate and print its outcome as JSON. Exits 0 when the call was executed (a run call whose program failed included), 1 when it failed, 3 when the gate refused it, 2 on a usage or policy error."`
	Doctor doctorCmd `cmd:"" help:"Explain which confinement layers this host offers and what each --confine mode would publish. Exits 0 when --confine strict would start here, 1 when it would refuse."`
	Exec   execCmd   `cmd:"" help:"Run one command under the same confinement as the run tool (for CI steps). The signals exec gets reach the command; after the first that ends it, --grace, then the whole tree is killed. Exits with the command's status (128 + a signal that ended it), 124 when it was killed at --timeout, 125 when the harness failed or refused before it ran, 126 when the program is not executable, 127 when it was not found."`
	MCP    mcpCmd    `cmd:"" name:"mcp" help:"Serve the published tools to an MCP client on stdin and stdout (Claude Code, Codex, any stdio client), or over streamable HTTP with --listen, through the same gate, confinement and record as call."`
	Record recordCmd `cmd:"" help:"Read a run record."`
	Policy policyCmd `cmd:"" help:"Check a policy file, show the effective policy and where each value came from, or print the policy file's JSON Schema."`
	Help   helpCmd   `cmd:"" help:"Show the help of a command (b10x-harness help exec), or of every command."`

	Completion completionCmd `cmd:"" help:"Print the shell completion script for bash, zsh or fish, made from this binary's commands and flags."`
	Man        manCmd        `cmd:"" hidden:"" help:"Print the manual page (roff, section 1), made from this binary's commands and flags."`

	Version kong.VersionFlag `help:"Print the version and exit."`
}

// env is what a subcommand gets from main: its streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string // the command line as given, before parsing

	// file is the --policy file (nil: none), userDefaults the user
	// defaults file (nil: none, skipped, or a command that does not read
	// it); sources says where each policy key's value came from, filled in
	// after parsing.
	file         *session.LoadedFile
	userDefaults *session.LoadedFile
	sources      map[string]string
}

func main() {
	reexec.Init()
	os.Exit(realMain(os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}))
}

// realMain parses args and runs a subcommand; it returns the exit status.
// Errors are one line on stderr, never a panic or a stack trace.
func realMain(args []string, e env) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.stderr, "b10x-harness: internal error: %s\n", termsafe.Message(fmt.Sprint(r)))
			code = 70
		}
	}()
	// A relative $TMPDIR names a different place for every process that
	// does not share the harness's working directory (hooks, the
	// temporary directory's remover) and cannot be a Landlock rule: it is
	// made absolute once, here, for the harness and all it starts.
	if d := os.Getenv("TMPDIR"); d != "" && !filepath.IsAbs(d) {
		if abs, err := filepath.Abs(d); err == nil {
			os.Setenv("TMPDIR", abs)
		}
	}
	if len(args) > 0 && args[0] == "exec" {
		// exec's command will start from the helper image: its load runs
		// beside the parsing (session.WarmExec).
		session.WarmExec()
	}
	ud, err := loadUserDefaults(args, os.Getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(renderError(err, nil)))
		return usageStatus(args)
	}
	lf, err := loadPolicyFile(args)
	if err != nil {
		fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(renderError(err, nil)))
		return usageStatus(args)
	}
	e.file, e.userDefaults = lf, ud
	// Kong turns invalid UTF-8 in an argument into U+FFFD, which could alias
	// one name to another. So: no argument may be invalid UTF-8, except the
	// last one of call (its ARGS_JSON), which callCmd takes byte for byte so
	// that the gate refuses it as invalid_argument and records the refusal.
	for i, a := range args {
		if !utf8.ValidString(a) && (len(args) == 0 || args[0] != "call" || i != len(args)-1) {
			fmt.Fprintf(e.stderr, "b10x-harness: argument %d (%q) is not valid UTF-8\n", i+1, a)
			return usageStatus(args)
		}
	}
	// help [COMMAND...] is COMMAND... --help.
	if len(args) > 0 && args[0] == "help" {
		args = append(slices.Clone(args[1:]), "--help")
	}
	e.args = args
	exited := -1
	opts := []kong.Option{}
	if lf != nil || ud != nil {
		opts = append(opts, kong.Resolvers(fileResolver{[]*session.LoadedFile{lf, ud}}))
	}
	parser, err := kong.New(cliFor(args), append(opts,
		kong.Name("b10x-harness"),
		kong.Description("A Linux-native sandboxed executor for model and CI tool calls."),
		kong.Vars{"version": version},
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(func(c int) { exited = c; panic(kongExit{}) }),
		kong.Bind(&e),
	)...)
	if err != nil {
		fmt.Fprintf(e.stderr, "b10x-harness: bug: %v\n", err)
		return 70
	}
	orderFlags(parser.Model.Node)
	kctx, perr := parseArgs(parser, args, &exited)
	if exited >= 0 {
		return exited
	}
	if perr != nil {
		fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(perr.Error()))
		return usageStatus(args)
	}
	e.sources = sourcesOf(kctx, lf, ud)
	if err := kctx.Run(&e); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		// An error may quote what a record, a file or a model holds.
		fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(renderError(err, e.sources)))
		var ue usageError
		if errors.As(err, &ue) || session.IsUsage(err) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// usageStatus is the exit status of a usage error in args: exec's is 125,
// so that it never looks like its command's own 2 (make's failure); every
// other command's is exitUsage.
func usageStatus(args []string) int {
	if len(args) > 0 && args[0] == "exec" {
		return exitSetupError
	}
	return exitUsage
}

// helpCmd is `help [COMMAND...]`, which realMain turns into
// `COMMAND... --help` before parsing: it is here to be listed.
type helpCmd struct {
	Command []string `arg:"" optional:"" help:"The command (and subcommand) to explain."`
}

func (helpCmd) Run() error { return errors.New("bug: help is rewritten to --help before parsing") }

type kongExit struct{}

// cliFor is what kong builds its model from for args: a struct holding
// only the command args[0] names, none when every argument is --version,
// and the whole cli otherwise (no command given, help, a misspelt one).
// kong.New builds and interpolates every command's flags and help, which
// was most of every start of the binary (docs/BENCHMARKS.md); one command's
// model is a fraction of that. What kong parses, shows and reports for a
// command line is the same either way: it walks only the path the line
// takes, and help below a command shows only that command.
func cliFor(args []string) any {
	all := reflect.TypeOf(cli{})
	version := len(args) > 0
	for _, a := range args {
		version = version && a == "--version"
	}
	var keep []reflect.StructField
	named := false
	for i := 0; i < all.NumField(); i++ {
		f := all.Field(i)
		if _, isCmd := f.Tag.Lookup("cmd"); !isCmd {
			keep = append(keep, f)
			continue
		}
		name := f.Tag.Get("name")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if !version && len(args) > 0 && args[0] == name {
			keep = append(keep, f)
			named = true
		}
	}
	var model reflect.Value
	if !named && !version {
		model = reflect.ValueOf(&cli{})
	} else {
		model = reflect.New(reflect.StructOf(keep))
	}
	bindFlags(model) // each command's flags of the policy table
	return model.Interface()
}

// parseArgs runs kong's parser, turning its exit hook (help, version) into a
// return instead of a process exit.
func parseArgs(p *kong.Kong, args []string, exited *int) (kctx *kong.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(kongExit); !ok {
				panic(r)
			}
			kctx, err = nil, nil
		}
	}()
	return p.Parse(args)
}

// writeJSON writes v as one JSON value and a newline, safe for a terminal
// (termsafe.WriteJSON).
func writeJSON(w io.Writer, indent string, v any) error { return termsafe.WriteJSON(w, indent, v) }
