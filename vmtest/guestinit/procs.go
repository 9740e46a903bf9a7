package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/mountinfo"
)

// mountEntry is one line of /proc/self/mountinfo, the fields vmtest uses.
type mountEntry struct {
	target, fstype, super string
}

func readMountinfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("open /proc/self/mountinfo: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, ps := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fs) < 5 || len(ps) < 3 {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		out = append(out, mountEntry{target: mountinfo.Unescape(fs[4]), fstype: ps[0], super: ps[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	return out, nil
}

// proc is a user-space process other than this init.
type proc struct {
	pid   int
	ppid  int
	state string
	comm  string
	cmd   string
}

func (p proc) String() string {
	return fmt.Sprintf("pid %d (%s) ppid %d state %s: %q", p.pid, p.comm, p.ppid, p.state, p.cmd)
}

const pfKthread = 0x00200000

// otherProcs lists every process except this one and kernel threads.
// Zombies are listed too (state "Z"); the caller reaps them.
func otherProcs() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it exited meanwhile
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		// f[0] state, f[1] ppid, ..., f[6] flags (stat fields 3, 4 and 9)
		if len(f) < 7 {
			continue
		}
		flags, _ := strconv.ParseUint(f[6], 10, 64)
		if flags&pfKthread != 0 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, proc{pid: pid, ppid: ppid, state: f[0], comm: s[open+1 : close], cmd: strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")})
	}
	return out, nil
}

// reapAll collects every exited child without blocking.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// leftovers waits up to settle for processes to finish exiting, reaping as
// it goes, and returns those still alive.
func leftovers(settle time.Duration) ([]proc, error) {
	deadline := time.Now().Add(settle)
	for {
		reapAll()
		ps, err := otherProcs()
		if err != nil {
			return nil, err
		}
		ps = slices.DeleteFunc(ps, func(p proc) bool { return p.state == "Z" })
		if len(ps) == 0 || time.Now().After(deadline) {
			return ps, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAll SIGKILLs every process but this one, repeatedly, until none is
// left or the time is up, and returns what survived.
func killAll(limit time.Duration) []proc {
	deadline := time.Now().Add(limit)
	for {
		reapAll()
		ps, err := otherProcs()
		if err != nil {
			return nil
		}
		alive := 0
		for _, p := range ps {
			if p.state != "Z" {
				alive++
				_ = unix.Kill(p.pid, unix.SIGKILL)
			}
		}
		if alive == 0 && len(ps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return ps
		}
		time.Sleep(20 * time.Millisecond)
	}
}
