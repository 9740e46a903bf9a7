package confine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/internal/probechild"
	"github.com/b10x/harness/internal/probecache"
	"github.com/b10x/harness/internal/reexec"
)

// probeEntry is the hidden entry point of the probe children. Every binary
// that imports this package must call reexec.Init first in main/TestMain.
const probeEntry = "confine-probe"

func init() { reexec.Register(probeEntry, probechild.Main) }

// probeTimeout bounds one probe child. Children are tiny; only a host under
// heavy load comes near it, and then the finding is Inconclusive.
const probeTimeout = 20 * time.Second

// childResult is what a probe child prints on stdout, one JSON object.
type childResult = probechild.Result

// probeAllNamespaces creates every namespace kind in one child, the common
// case where all are available: one process instead of one per kind. It
// reports ok=false when anything went wrong, and the caller then probes
// each kind alone to find out which and why.
func probeAllNamespaces(root bool) ([]Finding, bool) {
	var flags uintptr
	var pairs []string
	for _, ns := range namespaceKinds {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/ns/"+ns.proc, &st); err != nil {
			return nil, false
		}
		flags |= ns.flag
		pairs = append(pairs, ns.proc+"="+strconv.FormatUint(st.Ino, 10))
	}
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if !root {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	res, err := runProbeChild(attr, append([]string{"nsall"}, pairs...)...)
	if err != nil || !res.OK {
		return nil, false
	}
	out := make([]Finding, len(namespaceKinds))
	for i, ns := range namespaceKinds {
		out[i] = supported(fmt.Sprintf("clone(%s) together with every other namespace kind: created", cloneFlagName(ns.flag)))
	}
	return out, true
}

// startError is a failure to create the probe child: the clone (or exec)
// itself failed, which for a namespace probe is the kernel's answer.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// runProbeChild starts the probe child with attr and decodes its result.
// A failure to start is a *startError (the caller classifies it); any later
// failure makes the probe inconclusive.
func runProbeChild(attr *syscall.SysProcAttr, args ...string) (childResult, error) {
	// Go's syscall package leaks the two descriptors of its id-map pipe
	// when clone fails with UidMappings or GidMappings set. A kernel that
	// refuses user namespaces refuses them with or without maps, so ask it
	// first without: a refusal then leaks nothing.
	if attr.Cloneflags&unix.CLONE_NEWUSER != 0 && (attr.UidMappings != nil || attr.GidMappings != nil) {
		bare := *attr
		bare.UidMappings, bare.GidMappings = nil, nil
		if _, err := runProbeChild(&bare, args...); err != nil {
			var se *startError
			if errors.As(err, &se) {
				return childResult{}, err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := reexec.Command(probeEntry, args...)
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return childResult{}, &startError{err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return childResult{}, fmt.Errorf("probe child %v: no answer within %v", args, probeTimeout)
	}
	if err != nil {
		return childResult{}, fmt.Errorf("probe child %v: %w (stderr: %q)", args, err, firstLine(stderr.String()))
	}
	var res childResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return childResult{}, fmt.Errorf("probe child %v: bad answer %q: %w (stderr: %q)", args, firstLine(stdout.String()), err, firstLine(stderr.String()))
	}
	return res, nil
}

// probeNamespace creates a child in a new namespace of the given kind. When
// the process is not root the namespace is created together with a user
// namespace (mapping the caller's uid and gid to 0), as the run helper does.
func probeNamespace(ns namespaceKind, root bool) Finding {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/"+ns.proc, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return notSupported(fmt.Sprintf("/proc/self/ns/%s is absent: kernel built without %s", ns.proc, ns.config), err)
		}
		return inconclusive("cannot read this process's namespace", fmt.Errorf("stat /proc/self/ns/%s: %w", ns.proc, err))
	}
	flags := ns.flag
	how := fmt.Sprintf("clone(%s)", cloneFlagName(ns.flag))
	if !root && ns.flag != unix.CLONE_NEWUSER {
		flags |= unix.CLONE_NEWUSER
		how = fmt.Sprintf("clone(CLONE_NEWUSER|%s)", cloneFlagName(ns.flag))
	}
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if flags&unix.CLONE_NEWUSER != 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	res, err := runProbeChild(attr, "ns", ns.proc, strconv.FormatUint(st.Ino, 10))
	var se *startError
	switch {
	case errors.As(err, &se) && cloneRefusal(se.err):
		return notSupported(how+" refused", se.err)
	case se != nil:
		return inconclusive(how+" failed", se.err)
	case err != nil:
		return inconclusive(how, err)
	case !res.OK:
		return inconclusive(how+": "+res.Step, errors.New(res.Detail))
	}
	return supported(how + ": " + res.Detail)
}

func cloneFlagName(f uintptr) string {
	switch f {
	case unix.CLONE_NEWUSER:
		return "CLONE_NEWUSER"
	case unix.CLONE_NEWPID:
		return "CLONE_NEWPID"
	case unix.CLONE_NEWNS:
		return "CLONE_NEWNS"
	case unix.CLONE_NEWNET:
		return "CLONE_NEWNET"
	case unix.CLONE_NEWIPC:
		return "CLONE_NEWIPC"
	case unix.CLONE_NEWUTS:
		return "CLONE_NEWUTS"
	case unix.CLONE_NEWCGROUP:
		return "CLONE_NEWCGROUP"
	}
	return fmt.Sprintf("%#x", f)
}

// seccompActions are the filter return actions the run helper's filter
// uses; each must be available.
var seccompActions = []struct {
	name   string
	action uint32
	kernel string
}{
	{"allow", unix.SECCOMP_RET_ALLOW, "4.14"},
	{"errno", unix.SECCOMP_RET_ERRNO, "4.14"},
	{"kill_process", unix.SECCOMP_RET_KILL_PROCESS, "4.14"},
}

// probeSeccomp checks no_new_privs and a filter in a child, and the filter
// actions in this process (SECCOMP_GET_ACTION_AVAIL has no side effect).
func probeSeccomp() SeccompReport {
	var rep SeccompReport
	filterNote := ""
	for _, a := range seccompActions {
		e := seccompActionAvail(a.action)
		if e == 0 {
			continue
		}
		err := fmt.Errorf("seccomp(GET_ACTION_AVAIL, %s): %w", a.name, e)
		if e == unix.EOPNOTSUPP || e == unix.EINVAL || e == unix.ENOSYS {
			filterNote = fmt.Sprintf("filter action %s unavailable (needs Linux %s with CONFIG_SECCOMP_FILTER)", a.name, a.kernel)
			rep.Filter = notSupported(filterNote, err)
		} else {
			rep.Filter = inconclusive("cannot ask for filter actions", err)
		}
		break
	}

	res := cachedSeccompChild()
	switch {
	case res.err != nil:
		rep.NoNewPrivs = inconclusive("probe child failed", res.err)
		if rep.Filter.Status == StatusUnknown {
			rep.Filter = inconclusive("probe child failed", res.err)
		}
	case res.OK:
		rep.NoNewPrivs = supported("PR_SET_NO_NEW_PRIVS took effect in a child")
		if rep.Filter.Status == StatusUnknown {
			rep.Filter = supported("filter installed in a child; actions allow, errno, kill_process available")
		}
	case res.Step == "prctl(PR_SET_NO_NEW_PRIVS)" || res.Step == "prctl(PR_GET_NO_NEW_PRIVS)":
		rep.NoNewPrivs = refusal(res.childResult)
		if rep.Filter.Status == StatusUnknown {
			rep.Filter = notSupported("a filter needs no_new_privs, which failed", nil)
		}
	default:
		rep.NoNewPrivs = supported("PR_SET_NO_NEW_PRIVS took effect in a child")
		if rep.Filter.Status == StatusUnknown {
			rep.Filter = refusal(res.childResult)
		}
	}
	return rep
}

// refusal classifies a failed child step: EINVAL, ENOSYS, EOPNOTSUPP (not
// built or unknown option), EPERM and EACCES (forbidden, e.g. by an outer
// seccomp policy) are conclusive; any other errno is not.
func refusal(res childResult) Finding {
	err := fmt.Errorf("%s: %s", res.Step, res.Detail)
	switch syscall.Errno(res.Errno) {
	case unix.EINVAL, unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EOPNOTSUPP:
		return notSupported(res.Step+" refused", err)
	}
	return inconclusive(res.Step+" failed", err)
}

type seccompChild struct {
	childResult
	err error
}

// seccompCache holds a conclusive seccomp child result.
var seccompCache probecache.Value[seccompChild]

func cachedSeccompChild() seccompChild {
	return seccompCache.Get(func() (seccompChild, probecache.Outcome) {
		res, err := runProbeChild(&syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, "seccomp")
		out := seccompChild{childResult: res, err: err}
		switch {
		case err != nil:
			return out, probecache.Inconclusive
		case res.OK:
			return out, probecache.Supported
		}
		return out, refusal(res).Status.outcome()
	})
}
