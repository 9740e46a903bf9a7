package helper

import (
	"strconv"
	"syscall"
)

// The view's masked files (Mount kinds MaskFile and MaskBeneath), and which
// of them the program read (decision 0095).
//
// Each masked path is covered by an empty regular file of its own, mode
// 0444, made on a small tmpfs private to this call, its access and
// modification times set to the epoch: the program reads it as empty, and
// a write to it fails (EACCES: the file is not the program's to write,
// see below). Before the view is assembled, makeMasks mounts that tmpfs
// where the new root is then mounted (newRootBase, in the helper's private
// mount namespace), creates one file per mask there, keeps a descriptor of
// each and clones a bind of each (a detached tree, open_tree
// OPEN_TREE_CLONE; nosuid, nodev, noexec). The new root's tmpfs then
// covers it, and it leaves with the old root when pivotInto detaches that:
// the program sees nothing of it, and no path of the view can meet it.
// The clones keep the files alive; placeMount attaches each over its path.
//
// A read of a file updates its access time (relatime: an access time not
// after the modification time is always updated), so when the program
// ends the init reads each file's access time through its descriptor
// (maskFiles.encode): one not at the epoch was read. This costs a file
// and an fstat per mask, and nothing at all of the program's calls or of
// the init's exit (an inotify watch, tried first, made every process that
// held one wait for a grace period of about 10 ms when it closed it). What
// it sees is a read: an open without a read (and an O_PATH open, a stat,
// an open the kernel refused) is not told.
//
// The binds are not read-only, or the kernel would update no access time;
// a write is refused by the file's mode. Where the harness runs as root
// the files are root's and the program (never root) may neither write
// them nor set their times. Where it does not, the program runs as the
// harness's own uid, the files' owner: it could chmod a mask and write it
// (its own empty file, on its call's own tmpfs; the file beneath is not
// reached), or set a mask's access time back to the epoch after reading it,
// and so hide the read. The mask still reads as empty to the program.
//
// When the program ends the init sends StatusMasked: the indexes, in
// Plan.Mounts order, of the masks read, each once, so the message is
// bounded by the number of masks.

// maskFiles is what the init keeps to tell which masked files were read.
type maskFiles struct {
	fds []int // per Plan.Mounts index: the mask's file, -1 for another kind
}

// isMask reports whether m is a mask of a file (not MaskDir, whose empty
// tmpfs is not told).
func isMask(m Mount) bool { return m.Kind == MaskFile || m.Kind == MaskBeneath }

// makeMasks makes the masks' files (see above) on a tmpfs it mounts at
// base, before the new root is, and stores the detached bind of each in
// trees, at its mount's index. It returns their descriptors, none when the
// plan masks no file. On error it returns the step that failed; the trees
// it stored are closed by the caller (closeTrees) whatever happened.
func makeMasks(base string, mounts []Mount, trees []int) (*maskFiles, string, error) {
	n := 0
	for _, m := range mounts {
		if isMask(m) {
			n++
		}
	}
	w := &maskFiles{fds: make([]int, len(mounts))}
	for i := range w.fds {
		w.fds[i] = -1
	}
	if n == 0 {
		return w, "", nil
	}
	// The files are empty and no one writes them: no block is needed,
	// an inode for each and the root.
	data := "mode=0700,size=4k,nr_inodes=" + strconv.Itoa(n+1)
	if err := mountTmpfs(base, syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, data); err != nil {
		return nil, "mask files", err
	}
	for i, m := range mounts {
		if !isMask(m) {
			continue
		}
		tree, err := w.maskFile(base, i)
		if err != nil {
			w.close()
			return nil, "mask " + m.Dst, err
		}
		trees[i] = tree
	}
	return w, "", nil
}

// maskFile creates the file of mask i in the masks' tmpfs at stage, keeps
// a descriptor of it and returns a detached bind of it.
func (w *maskFiles) maskFile(stage string, i int) (int, error) {
	name := "mask " + strconv.Itoa(i)
	path := stage + "/" + strconv.Itoa(i)
	fd, err := sysOpen(path, syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDONLY|syscall.O_CLOEXEC, 0o444)
	if err != nil {
		return -1, opErr("create", name, err)
	}
	w.fds[i] = fd
	// Readable by all whatever the umask, as an empty file; its times at
	// the epoch, so that any read moves its access time.
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCHMOD, uintptr(fd), 0o444, 0); e != 0 {
		return -1, opErr("fchmod", name, e)
	}
	if err := syscall.UtimesNano(path, []syscall.Timespec{{}, {}}); err != nil {
		return -1, opErr("utimensat", name, err)
	}
	tree, err := sysOpenTree(path, openTreeClone|openTreeCloexec)
	if err != nil {
		return -1, opErr("open_tree", name, err)
	}
	if err := sysMountSetattr(tree, "", atEmptyPath, mountAttrNosuid|mountAttrNodev|mountAttrNoexec); err != nil {
		sysClose(tree)
		return -1, opErr("mount_setattr", name, err)
	}
	return tree, nil
}

// close closes the init's descriptors of the masks' files.
func (w *maskFiles) close() {
	if w == nil {
		return
	}
	for i, fd := range w.fds {
		if fd >= 0 {
			sysClose(fd)
			w.fds[i] = -1
		}
	}
}

// read returns the indexes, in Plan.Mounts order, of the masks whose file
// was read (its access time moved from the epoch), or false when one
// could not be examined.
func (w *maskFiles) read() (idx []int, ok bool) {
	for i, fd := range w.fds {
		if fd < 0 {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, false
		}
		if st.Atim.Sec != 0 || st.Atim.Nsec != 0 {
			idx = append(idx, i)
		}
	}
	return idx, true
}

// encode appends the StatusMasked message when every mask could be
// examined: the count and the indexes of the masks read (u32 each).
func (w *maskFiles) encode(e *Encoder) {
	idx, ok := w.read()
	if !ok {
		return
	}
	e.U8(StatusMasked)
	e.U32(uint32(len(idx)))
	for _, i := range idx {
		e.U32(uint32(i))
	}
}

// DecodeMasked reads a StatusMasked message after its tag: the indexes,
// in Plan.Mounts order, of the masks read. The caller checks them against
// its plan.
func DecodeMasked(d *Decoder) (idx []int) {
	n := d.Count(4, "masks read")
	for i := 0; i < n && d.Err == nil; i++ {
		idx = append(idx, int(d.U32()))
	}
	return idx
}
