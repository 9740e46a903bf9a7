package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests cover the guest init's helpers on the host; the init as a
// whole runs only as PID 1 of a guest (go run ./vmtest -selftest boots it).

func TestNewItems(t *testing.T) {
	got := newItems([]string{"/", "/proc", "/tmp"}, []string{"/", "/proc", "/tmp", "/tmp", "/mnt"})
	if !slices.Equal(got, []string{"/tmp", "/mnt"}) {
		t.Errorf("newItems = %q, want a second /tmp mount and /mnt", got)
	}
	if got := newItems([]string{"/a", "/b"}, []string{"/a"}); len(got) != 0 {
		t.Errorf("an unmount counted as new: %q", got)
	}
}

func TestReadMountinfo(t *testing.T) {
	ms, err := readMountinfo()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ms, func(m mountEntry) bool { return m.target == "/proc" && m.fstype == "proc" }) {
		t.Errorf("/proc not found among %d mounts", len(ms))
	}
}

func TestOtherProcsSeesAChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ps, err := otherProcs()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p proc) bool { return p.pid == cmd.Process.Pid })
	if i < 0 {
		t.Fatalf("child %d not listed", cmd.Process.Pid)
	}
	if p := ps[i]; p.ppid != os.Getpid() || p.comm != "sleep" || p.cmd != "sleep 30" || p.state == "Z" {
		t.Errorf("child listed as %v", p)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ps, _ = otherProcs()
	if slices.ContainsFunc(ps, func(p proc) bool { return p.pid == cmd.Process.Pid }) {
		t.Error("reaped child still listed")
	}
	// Kernel threads (kthreadd is PID 2 on every Linux) are never listed.
	if slices.ContainsFunc(ps, func(p proc) bool { return p.pid == 2 }) {
		t.Error("kthreadd listed as a user process")
	}
}

func TestCopyLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "one\ntwo\n" + long + "\nlast without newline"
	var out bytes.Buffer
	copyLines(strings.NewReader(in), &out)
	if out.String() != in+"\n" {
		t.Errorf("copyLines changed the stream: %d bytes in, %d out", len(in), out.Len())
	}
}

// Output that imitates a result line is defused; the same text inside a
// line, or after a long line's first piece, is left alone.
func TestCopyLinesDefusesResultLines(t *testing.T) {
	long := strings.Repeat("y", 70<<10)
	in := "VMTEST DONE EXIT 0\nok VMTEST DONE EXIT 0\n" + long + "VMTEST x\nVMTEST PKG m EXIT 0 TIME 1s"
	var out bytes.Buffer
	copyLines(strings.NewReader(in), &out)
	want := " VMTEST DONE EXIT 0\nok VMTEST DONE EXIT 0\n" + long + "VMTEST x\n VMTEST PKG m EXIT 0 TIME 1s\n"
	if out.String() != want {
		t.Errorf("copyLines output differs (%d bytes, want %d):\n%.200q", out.Len(), len(want), out.String())
	}
}

func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "testdata", "d"), 0o755)
	os.WriteFile(filepath.Join(src, "a_test.go"), []byte("package a"), 0o644)
	os.WriteFile(filepath.Join(src, "testdata", "d", "run.sh"), []byte("#!/bin/sh"), 0o755)
	os.Symlink("d/run.sh", filepath.Join(src, "testdata", "l"))
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a_test.go")); string(b) != "package a" {
		t.Errorf("a_test.go: %q", b)
	}
	if st, err := os.Stat(filepath.Join(dst, "testdata", "d", "run.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", st, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "testdata", "l")); err != nil || l != "d/run.sh" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if err := copyTree(filepath.Join(src, "absent"), dst); err == nil {
		t.Error("copying a missing tree succeeded")
	}
}
