package tools

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/internal/setting"
)

// checkOutsideView refuses, at start, an allowed program that would fail
// inside every run call: one that lies outside the view (not beneath a
// system directory, the workspace or an extra path) and needs more of its
// surroundings than its own file, which is all a run child is shown of it
// (spawn binds that one file). That is a script (a pyenv or rbenv shim, an
// npm bin link: its interpreter may be a system one, but what it runs and
// reads lies beside it), or an ELF program whose loader lies outside the
// view (a Nix or Guix store path). A static program, or a dynamic one
// loaded by a system loader, runs from its one file and is allowed. The
// error names the fix: the directory to add with --allow-read.
func checkOutsideView(canon string, view RunView) error {
	dirs := []string{view.Workspace.Path}
	for _, r := range view.Read {
		dirs = append(dirs, r.Path)
	}
	for _, w := range view.Write {
		dirs = append(dirs, w.Path)
	}
	if spawn.InView(canon, dirs) {
		return nil
	}
	f, err := os.Open(canon)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	why := ""
	switch {
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		why = fmt.Sprintf("is a script (#!%s): what it runs and reads beside it is not shown to run calls", strings.TrimSpace(string(line)))
	case bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		interp, libDirs, err := elfNeeds(f, filepath.Dir(canon))
		if err != nil {
			return fmt.Errorf("%s: %v", canon, err)
		}
		if interp != "" && !spawn.InView(interp, dirs) {
			why = "is loaded by " + interp + ", which run calls cannot see"
		}
		for _, l := range libDirs {
			if why == "" && !spawn.InView(l, dirs) {
				why = "looks for its libraries in " + l + " (its RUNPATH), which run calls cannot see"
			}
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%s lies outside the run view and %s; make its directory visible with %s %s", canon, why, setting.Flag(setting.AllowRead), suggestRead(canon))
}

// elfNeeds is what an ELF file needs beside itself: its program
// interpreter (PT_INTERP, "" for a static one) and the directories of its
// RUNPATH and RPATH, $ORIGIN replaced by origin, each canonical where it
// exists.
func elfNeeds(f *os.File, origin string) (interp string, libDirs []string, err error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", nil, fmt.Errorf("not a readable ELF file: %v", err)
	}
	canon := func(p string) string {
		if c, err := filepath.EvalSymlinks(p); err == nil {
			return c
		}
		return filepath.Clean(p)
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return "", nil, fmt.Errorf("its interpreter: %v", err)
		}
		interp = canon(string(bytes.TrimRight(b, "\x00")))
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		paths, _ := ef.DynString(tag) // a static file has no dynamic section
		for _, p := range paths {
			for _, d := range filepath.SplitList(p) {
				d = strings.NewReplacer("${ORIGIN}", origin, "$ORIGIN", origin).Replace(d)
				// One that does not exist holds nothing it needs.
				if c, err := filepath.EvalSymlinks(d); err == nil && filepath.IsAbs(c) {
					libDirs = append(libDirs, c)
				}
			}
		}
	}
	return interp, libDirs, nil
}

// suggestRead is the directory to suggest for --allow-read: beneath the
// home directory, the directory of the home's that holds the program (a
// version manager's ~/.pyenv, ~/.nvm, ~/.cargo: its shims need the rest of
// it); elsewhere the program's own directory.
func suggestRead(canon string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = h
		}
		if rel, err := filepath.Rel(home, canon); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			first, _, _ := strings.Cut(rel, string(filepath.Separator))
			if first != filepath.Base(canon) {
				return filepath.Join(home, first)
			}
		}
	}
	return filepath.Dir(canon)
}
