package helper

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestStageReportWording: each report the program's stage can send is
// worded as the step failed (its name, the operation, the errno that
// errors.Is finds), never as the "unknown step" bug; a pin mismatch keeps
// its own error type, with the identity the stage found.
func TestStageReportWording(t *testing.T) {
	p := &Plan{Path: "/usr/bin/make", ProgDev: 1, ProgIno: 2, Dir: "/w", DomainName: "b10x1"}
	cases := []struct {
		r        stageReport
		step     string
		contains string
		errno    syscall.Errno
	}{
		{stageReport{step: uint32(stepStart), what: whatSetresuid, errno: uint32(syscall.EPERM), a: 1000}, "start the program's stage", "setresuid(1000)", syscall.EPERM},
		{stageReport{step: uint32(stepStart), what: whatMaps, errno: uint32(syscall.EIO)}, "start the program's stage", "id maps", syscall.EIO},
		{stageReport{step: uint32(stepChdir), errno: uint32(syscall.ENOENT)}, "chdir /w", "no such file", syscall.ENOENT},
		{stageReport{step: uint32(stepIdentity), what: 0, a: 0, b: 65534}, "identity", "runs as uid 0, want 65534", 0},
		{stageReport{step: uint32(stepIdentity), what: 1, a: 5, b: 6}, "identity", "runs as gid 5, want 6", 0},
		{stageReport{step: uint32(stepCaps), what: whatBoundDrop, errno: uint32(syscall.EPERM), a: 8}, "drop capabilities", "PR_CAPBSET_DROP(8)", syscall.EPERM},
		{stageReport{step: uint32(stepCaps), what: whatSetsLeft}, "drop capabilities", "capabilities remain after capset", 0},
		{stageReport{step: uint32(stepCaps), what: whatBoundLeft, a: 21}, "drop capabilities", "capability 21 remains in the bounding set", 0},
		{stageReport{step: uint32(stepNProc), what: whatForked}, "pids rlimit", "not enforced", 0},
		{stageReport{step: uint32(stepNProc), what: whatMismatch, a: 1, b: 2, c: 3}, "pids rlimit", "reads 1/2, want 3", 0},
		{stageReport{step: uint32(stepCloseRange), errno: uint32(syscall.EINVAL)}, "close descriptors", "close_range(CLOEXEC)", syscall.EINVAL},
		{stageReport{step: uint32(stepNoNewPrivs), what: whatReadBack}, "no_new_privs", "does not report it set", 0},
		{stageReport{step: uint32(stepSeccomp), what: whatSendListener, errno: uint32(syscall.EPIPE)}, "seccomp", "the seccomp listener", syscall.EPIPE},
		{stageReport{step: uint32(stepSeccomp), what: whatFilter, errno: uint32(syscall.EACCES)}, "seccomp", "SET_MODE_FILTER", syscall.EACCES},
		{stageReport{step: uint32(stepLandlock), what: whatNameDiffers}, "landlock", "PR_GET_NAME(b10x1): the name read back differs", 0},
		{stageReport{step: uint32(stepLandlock), what: whatRestrict, errno: uint32(syscall.E2BIG)}, "landlock", "landlock_restrict_self", syscall.E2BIG},
		{stageReport{step: uint32(stepReceive), what: whatTooFew}, "receive the call", "fewer descriptors", 0},
		{stageReport{step: uint32(stepProgram), what: whatWalk, errno: uint32(syscall.ELOOP)}, "program /usr/bin/make", "now a symbolic link", syscall.ELOOP},
		{stageReport{step: uint32(stepProgram), what: whatWalk, errno: uint32(syscall.ENOENT)}, "program /usr/bin/make", "moved or removed", syscall.ENOENT},
		{stageReport{step: uint32(stepExec), what: whatExecveat, errno: uint32(syscall.EACCES)}, "exec /usr/bin/make", "execveat(/usr/bin/make)", syscall.EACCES},
	}
	for _, c := range cases {
		step, err := c.r.failure(p)
		if step != c.step || err == nil || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("report %+v: %q, %v; want step %q and an error holding %q", c.r, step, err, c.step, c.contains)
			continue
		}
		if c.errno != 0 && !errors.Is(err, c.errno) {
			t.Errorf("report %+v: %v does not match %v", c.r, err, c.errno)
		}
	}
	step, err := (&stageReport{step: uint32(stepProgram), what: whatMismatch, a: 7, b: 9, c: syscall.S_IFDIR}).failure(p)
	var pm *pinMismatch
	if step != "program /usr/bin/make" || !errors.As(err, &pm) || pm.gotDev != 7 || pm.gotIno != 9 || !pm.gotDir || pm.wantIno != 2 {
		t.Errorf("a pin mismatch: %q, %#v", step, err)
	}
	for s := stepStart; s <= stepExec; s++ {
		if _, err := (&stageReport{step: uint32(s)}).failure(p); err == nil || strings.Contains(err.Error(), "bug") {
			t.Errorf("step %d: %v", s, err)
		}
	}
}

// TestLayCall: the arena holds the call as the stage reads it, and a
// call that does not fit, or holds a NUL, is refused, not cut.
func TestLayCall(t *testing.T) {
	p := &Plan{Path: "/bin/sh", ProgIno: 3, Argv: []string{"sh", "-c", "echo hi"}, Env: []string{"A=1"}, Dir: "/tmp"}
	r := &arena{b: make([]byte, callArena(p))}
	c, err := layCall(r, p.Path, 0, p.ProgIno, p.Argv, p.Env, p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.ncomps != 2 || cString(r, c.comp(0)) != "bin" || cString(r, c.comp(1)) != "sh" || cString(r, c.path) != "/bin/sh" || cString(r, c.dir) != "/tmp" {
		t.Errorf("laid out: %d components, path %q, dir %q", c.ncomps, cString(r, c.path), cString(r, c.dir))
	}
	if got := cStrings(r, c.argv); strings.Join(got, "|") != "sh|-c|echo hi" {
		t.Errorf("argv %q", got)
	}
	if got := cStrings(r, c.envv); strings.Join(got, "|") != "A=1" {
		t.Errorf("env %q", got)
	}
	if _, err := layCall(&arena{b: make([]byte, 200)}, p.Path, 0, 3, []string{strings.Repeat("x", 300)}, nil, ""); err == nil {
		t.Error("a call larger than its arena was laid out")
	}
	if _, err := layCall(&arena{b: make([]byte, 4096)}, p.Path, 0, 3, []string{"a\x00b"}, nil, ""); err == nil {
		t.Error("an argument holding a NUL was laid out")
	}
	for _, bad := range []string{"bin/sh", "/bin//sh", "/bin/../sh", "/./sh"} {
		if _, err := programComponents(bad, 3); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("program path %q: %v, want EINVAL", bad, err)
		}
	}
}

// cString reads the C string at p, inside r.
func cString(r *arena, p uintptr) string {
	off := int(p - r.base())
	end := off
	for r.b[end] != 0 {
		end++
	}
	return string(r.b[off:end])
}

// cStrings reads the NULL-terminated array of C strings at p, inside r.
func cStrings(r *arena, p uintptr) []string {
	var out []string
	for off := int(p - r.base()); ; off += int(unsafe.Sizeof(p)) {
		s := *(*uintptr)(unsafe.Pointer(&r.b[off]))
		if s == 0 {
			return out
		}
		out = append(out, cString(r, s))
	}
}
