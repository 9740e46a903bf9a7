package helper

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The helper writes out the system call numbers and constants it needs
// (sysconst.go, sysnum_*.go) so as not to import golang.org/x/sys; a test
// may import it. These tests check each hand-written value against
// x/sys/unix's, which is generated from the kernel's UAPI headers: a
// mistyped flag would otherwise show only as a mount that is not read-only
// or a path lookup that follows a link. x/sys/unix's SYS_* are those of
// the architecture the test is built for, so the per-architecture numbers
// are checked for each GOARCH the test is built for (amd64, arm64).

// TestSysconstMatchesUnix: every hand-written system call number and
// constant equals x/sys/unix's.
func TestSysconstMatchesUnix(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		// sysconst.go: system calls numbered the same on every architecture.
		{"SYS_OPEN_TREE", sysOpenTreeNr, unix.SYS_OPEN_TREE},
		{"SYS_MOVE_MOUNT", sysMoveMountNr, unix.SYS_MOVE_MOUNT},
		{"SYS_CLOSE_RANGE", sysCloseRangeNr, unix.SYS_CLOSE_RANGE},
		{"SYS_OPENAT2", sysOpenat2Nr, unix.SYS_OPENAT2},
		{"SYS_MOUNT_SETATTR", sysMountSetattrNr, unix.SYS_MOUNT_SETATTR},
		{"SYS_LANDLOCK_CREATE_RULESET", sysLandlockCreateRulesetNr, unix.SYS_LANDLOCK_CREATE_RULESET},
		{"SYS_LANDLOCK_ADD_RULE", sysLandlockAddRuleNr, unix.SYS_LANDLOCK_ADD_RULE},
		{"SYS_LANDLOCK_RESTRICT_SELF", sysLandlockRestrictSelfNr, unix.SYS_LANDLOCK_RESTRICT_SELF},

		// sysnum_$GOARCH.go: numbered per architecture. fstatat is
		// newfstatat on both amd64 and arm64 (the syscall package calls it
		// SYS_FSTATAT on arm64).
		{"SYS_NEWFSTATAT", sysFstatat, unix.SYS_NEWFSTATAT},
		{"SYS_EXECVEAT", sysExecveat, unix.SYS_EXECVEAT},
		{"SYS_SECCOMP", sysSeccomp, unix.SYS_SECCOMP},

		// sysconst.go: flags and values.
		{"AT_FDCWD", atFDCWDInt, unix.AT_FDCWD},
		{"AT_SYMLINK_NOFOLLOW", atSymlinkNofollow, unix.AT_SYMLINK_NOFOLLOW},
		{"AT_EMPTY_PATH", atEmptyPath, unix.AT_EMPTY_PATH},
		{"AT_RECURSIVE", atRecursive, unix.AT_RECURSIVE},
		{"O_PATH", oPath, unix.O_PATH},
		{"PR_GET_NO_NEW_PRIVS", prGetNoNewPrivs, unix.PR_GET_NO_NEW_PRIVS},
		{"RESOLVE_NO_MAGICLINKS", resolveNoMagiclinks, unix.RESOLVE_NO_MAGICLINKS},
		{"RESOLVE_NO_SYMLINKS", resolveNoSymlinks, unix.RESOLVE_NO_SYMLINKS},
		{"RESOLVE_BENEATH", resolveBeneath, unix.RESOLVE_BENEATH},
		{"PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS},
		{"RLIMIT_NPROC", rlimitNproc, unix.RLIMIT_NPROC},
		{"PR_SET_NAME", prSetName, unix.PR_SET_NAME},
		{"PR_GET_NAME", prGetName, unix.PR_GET_NAME},
		{"PR_CAP_AMBIENT", prCapAmbient, unix.PR_CAP_AMBIENT},
		{"PR_CAP_AMBIENT_CLEAR_ALL", prCapAmbientClearAll, unix.PR_CAP_AMBIENT_CLEAR_ALL},
		{"OPEN_TREE_CLONE", openTreeClone, unix.OPEN_TREE_CLONE},
		// x/sys/unix has no OPEN_TREE_CLOEXEC; <linux/mount.h> defines it
		// as O_CLOEXEC, which TestOpenTreeCloexecKernel asks the kernel.
		{"OPEN_TREE_CLOEXEC (O_CLOEXEC)", openTreeCloexec, unix.O_CLOEXEC},
		{"MOUNT_ATTR_RDONLY", mountAttrRdonly, unix.MOUNT_ATTR_RDONLY},
		{"MOUNT_ATTR_NOSUID", mountAttrNosuid, unix.MOUNT_ATTR_NOSUID},
		{"MOUNT_ATTR_NODEV", mountAttrNodev, unix.MOUNT_ATTR_NODEV},
		{"MOUNT_ATTR_NOEXEC", mountAttrNoexec, unix.MOUNT_ATTR_NOEXEC},
		{"MOVE_MOUNT_F_EMPTY_PATH", moveMountFEmptyPath, unix.MOVE_MOUNT_F_EMPTY_PATH},
		{"MOVE_MOUNT_T_EMPTY_PATH", moveMountTEmptyPath, unix.MOVE_MOUNT_T_EMPTY_PATH},
		{"CLOSE_RANGE_CLOEXEC", closeRangeCloexec, unix.CLOSE_RANGE_CLOEXEC},
		{"SECCOMP_SET_MODE_FILTER", seccompSetModeFilter, unix.SECCOMP_SET_MODE_FILTER},
		{"SECCOMP_FILTER_FLAG_NEW_LISTENER", seccompFilterFlagNewListener, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER},
		{"SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", seccompFilterFlagWaitKillable, unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV},
		{"SECCOMP_RET_ERRNO", seccompRetErrno, unix.SECCOMP_RET_ERRNO},
		{"POLLIN", pollIn, unix.POLLIN},
		{"POLLERR", pollErr, unix.POLLERR},
		{"POLLHUP", pollHup, unix.POLLHUP},
		{"SECCOMP_RET_USER_NOTIF", seccompRetUserNotif, unix.SECCOMP_RET_USER_NOTIF},
		{"SECCOMP_IOCTL_NOTIF_RECV", seccompIoctlNotifRecv, unix.SECCOMP_IOCTL_NOTIF_RECV},
		{"SECCOMP_IOCTL_NOTIF_SEND", seccompIoctlNotifSend, unix.SECCOMP_IOCTL_NOTIF_SEND},
		{"_LINUX_CAPABILITY_VERSION_3", linuxCapabilityVersion3, unix.LINUX_CAPABILITY_VERSION_3},
		{"LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON", RestrictSelfLogNewExecOn, unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d (%#x) in the helper, %d (%#x) in x/sys/unix", c.name, c.got, c.got, c.want, c.want)
		}
	}
}

// TestOpenTreeCloexecKernel: OPEN_TREE_CLOEXEC, which x/sys/unix does not
// define, is what the kernel takes it for: open_tree with the helper's
// value (and nothing else: no clone, so no privilege is needed) gives a
// descriptor marked close-on-exec, and without it one that is not. The
// kernel itself is the reference, on every machine and VM shape.
func TestOpenTreeCloexecKernel(t *testing.T) {
	for _, c := range []struct {
		flags uint
		want  bool
	}{{openTreeCloexec, true}, {0, false}} {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/", c.flags)
		if err != nil {
			t.Fatalf("open_tree(/, %#x): %v", c.flags, err)
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		if got := fl&unix.FD_CLOEXEC != 0; got != c.want {
			t.Errorf("open_tree(/, %#x): close-on-exec %v, want %v: the helper's OPEN_TREE_CLOEXEC is not the kernel's", c.flags, got, c.want)
		}
	}
}

// TestSysStructLayout: the structures the helper passes to the kernel
// have x/sys/unix's size and field offsets. landlockRulesetAttr stops at
// the scoped field (Landlock ABI 6), so it is compared up to there; the
// kernel is told its size.
func TestSysStructLayout(t *testing.T) {
	var (
		ma  mountAttr
		uma unix.MountAttr
		oh  openHow
		uoh unix.OpenHow
		rs  landlockRulesetAttr
		urs unix.LandlockRulesetAttr
		pb  landlockPathBeneathAttr
		upb unix.LandlockPathBeneathAttr
		ch  capUserHeader
		uch unix.CapUserHeader
		cd  capUserData
		ucd unix.CapUserData
		sn  seccompNotif
		sr  seccompNotifResp
		pf  pollFD
		upf unix.PollFd
	)
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof mount_attr", unsafe.Sizeof(ma), unsafe.Sizeof(uma)},
		{"mount_attr.attr_set", unsafe.Offsetof(ma.attrSet), unsafe.Offsetof(uma.Attr_set)},
		{"mount_attr.attr_clr", unsafe.Offsetof(ma.attrClr), unsafe.Offsetof(uma.Attr_clr)},
		{"mount_attr.propagation", unsafe.Offsetof(ma.propagation), unsafe.Offsetof(uma.Propagation)},
		{"mount_attr.userns_fd", unsafe.Offsetof(ma.usernsFD), unsafe.Offsetof(uma.Userns_fd)},

		{"sizeof open_how", unsafe.Sizeof(oh), unsafe.Sizeof(uoh)},
		{"open_how.flags", unsafe.Offsetof(oh.flags), unsafe.Offsetof(uoh.Flags)},
		{"open_how.mode", unsafe.Offsetof(oh.mode), unsafe.Offsetof(uoh.Mode)},
		{"open_how.resolve", unsafe.Offsetof(oh.resolve), unsafe.Offsetof(uoh.Resolve)},

		{"sizeof landlock_ruleset_attr up to scoped", unsafe.Sizeof(rs), unsafe.Offsetof(urs.Scoped) + unsafe.Sizeof(urs.Scoped)},
		{"landlock_ruleset_attr.handled_access_fs", unsafe.Offsetof(rs.handledAccessFS), unsafe.Offsetof(urs.Handled_access_fs)},
		{"landlock_ruleset_attr.handled_access_net", unsafe.Offsetof(rs.handledAccessNet), unsafe.Offsetof(urs.Handled_access_net)},
		{"landlock_ruleset_attr.scoped", unsafe.Offsetof(rs.scoped), unsafe.Offsetof(urs.Scoped)},

		{"landlock_path_beneath_attr.allowed_access", unsafe.Offsetof(pb.allowedAccess), unsafe.Offsetof(upb.Allowed_access)},
		{"landlock_path_beneath_attr.parent_fd", unsafe.Offsetof(pb.parentFD), unsafe.Offsetof(upb.Parent_fd)},

		{"sizeof __user_cap_header_struct", unsafe.Sizeof(ch), unsafe.Sizeof(uch)},
		{"__user_cap_header_struct.version", unsafe.Offsetof(ch.version), unsafe.Offsetof(uch.Version)},
		{"__user_cap_header_struct.pid", unsafe.Offsetof(ch.pid), unsafe.Offsetof(uch.Pid)},
		{"sizeof __user_cap_data_struct", unsafe.Sizeof(cd), unsafe.Sizeof(ucd)},
		{"__user_cap_data_struct.effective", unsafe.Offsetof(cd.effective), unsafe.Offsetof(ucd.Effective)},
		{"__user_cap_data_struct.permitted", unsafe.Offsetof(cd.permitted), unsafe.Offsetof(ucd.Permitted)},
		{"__user_cap_data_struct.inheritable", unsafe.Offsetof(cd.inheritable), unsafe.Offsetof(ucd.Inheritable)},

		// x/sys/unix has no seccomp_notif types: their sizes are the ones
		// the ioctl numbers encode (_IOWR's size field), and the fields
		// are where include/uapi/linux/seccomp.h puts them.
		{"sizeof pollfd", unsafe.Sizeof(pf), unsafe.Sizeof(upf)},
		{"pollfd.revents", unsafe.Offsetof(pf.revents), unsafe.Offsetof(upf.Revents)},
		{"sizeof seccomp_notif", unsafe.Sizeof(sn), uintptr(unix.SECCOMP_IOCTL_NOTIF_RECV>>16) & 0x3fff},
		{"seccomp_notif.data.nr", unsafe.Offsetof(sn.nr), 16},
		{"seccomp_notif.data.args", unsafe.Offsetof(sn.args), 32},
		{"sizeof seccomp_notif_resp", unsafe.Sizeof(sr), uintptr(unix.SECCOMP_IOCTL_NOTIF_SEND>>16) & 0x3fff},
		{"seccomp_notif_resp.error", unsafe.Offsetof(sr.error), 16},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d in the helper, %d in x/sys/unix", c.name, c.got, c.want)
		}
	}
}
