package helper

import "syscall"

// The helper imports the standard library only, not golang.org/x/sys.
// It runs from this package's init, and Go initialises the packages of a
// binary in import-path order among those whose imports are initialised:
// an import that sorts late ("golang.org/...") would hold the helper back
// until every ready package sorting before it (the MCP SDK, the CLI,
// seccomp tables) had initialised too, which measured ~7 ms of CPU per
// spawn (docs/decisions/0034). What syscall lacks is defined here, from
// the kernel's UAPI headers.

// System calls numbered from 424 on are the same on every architecture.
const (
	sysOpenTreeNr              = 428
	sysMoveMountNr             = 429
	sysCloseRangeNr            = 436
	sysOpenat2Nr               = 437
	sysMountSetattrNr          = 442
	sysLandlockCreateRulesetNr = 444
	sysLandlockAddRuleNr       = 445
	sysLandlockRestrictSelfNr  = 446
)

const (
	atFDCWDInt        = -0x64  // AT_FDCWD
	atSymlinkNofollow = 0x100  // AT_SYMLINK_NOFOLLOW
	atEmptyPath       = 0x1000 // AT_EMPTY_PATH
	atRecursive       = 0x8000 // AT_RECURSIVE

	oPath = 0x200000 // O_PATH

	prGetNoNewPrivs     = 39   // PR_GET_NO_NEW_PRIVS
	resolveNoMagiclinks = 0x02 // RESOLVE_NO_MAGICLINKS
	resolveNoSymlinks   = 0x04 // RESOLVE_NO_SYMLINKS
	resolveBeneath      = 0x08 // RESOLVE_BENEATH

	prSetNoNewPrivs      = 38 // PR_SET_NO_NEW_PRIVS
	rlimitNproc          = 6  // RLIMIT_NPROC (asm-generic, every architecture here)
	prSetName            = 15 // PR_SET_NAME
	prGetName            = 16 // PR_GET_NAME
	prCapAmbient         = 47 // PR_CAP_AMBIENT
	prCapAmbientClearAll = 4  // PR_CAP_AMBIENT_CLEAR_ALL

	openTreeClone   = 1                 // OPEN_TREE_CLONE
	openTreeCloexec = syscall.O_CLOEXEC // OPEN_TREE_CLOEXEC

	mountAttrRdonly = 0x1 // MOUNT_ATTR_RDONLY
	mountAttrNosuid = 0x2 // MOUNT_ATTR_NOSUID
	mountAttrNodev  = 0x4 // MOUNT_ATTR_NODEV
	mountAttrNoexec = 0x8 // MOUNT_ATTR_NOEXEC

	moveMountFEmptyPath = 0x4    // MOVE_MOUNT_F_EMPTY_PATH
	moveMountTEmptyPath = 0x40   // MOVE_MOUNT_T_EMPTY_PATH
	closeRangeCloexec   = 1 << 2 // CLOSE_RANGE_CLOEXEC

	seccompSetModeFilter = 1 // SECCOMP_SET_MODE_FILTER

	seccompFilterFlagNewListener  = 1 << 3     // SECCOMP_FILTER_FLAG_NEW_LISTENER
	seccompFilterFlagWaitKillable = 1 << 5     // SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19)
	seccompRetErrno               = 0x00050000 // SECCOMP_RET_ERRNO
	seccompRetUserNotif           = 0x7fc00000 // SECCOMP_RET_USER_NOTIF
	seccompIoctlNotifRecv         = 0xc0502100 // SECCOMP_IOCTL_NOTIF_RECV: _IOWR('!', 0, struct seccomp_notif)
	seccompIoctlNotifSend         = 0xc0182101 // SECCOMP_IOCTL_NOTIF_SEND: _IOWR('!', 1, struct seccomp_notif_resp)

	linuxCapabilityVersion3 = 0x20080522 // _LINUX_CAPABILITY_VERSION_3
)

// pollFD is struct pollfd; pollIn, pollErr and pollHup its flags.
type pollFD struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1
	pollErr = 0x8
	pollHup = 0x10
)

// seccompNotif is struct seccomp_notif: the id, the pid, flags, and
// struct seccomp_data (nr, arch, instruction pointer, six arguments).
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// mountAttr is struct mount_attr.
type mountAttr struct {
	attrSet     uint64
	attrClr     uint64
	propagation uint64
	usernsFD    uint64
}

// openHow is struct open_how (openat2).
type openHow struct {
	flags   uint64
	mode    uint64
	resolve uint64
}

// landlockRulesetAttr is struct landlock_ruleset_attr up to the scoped
// field (Landlock ABI 6); the kernel is told how much of it is passed.
type landlockRulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// landlockPathBeneathAttr is struct landlock_path_beneath_attr. The kernel's
// is packed (12 bytes) and read as such; Go pads this one to 16.
type landlockPathBeneathAttr struct {
	allowedAccess uint64
	parentFD      int32
}

// capUserHeader and capUserData are the capset(2) structures.
type capUserHeader struct {
	version uint32
	pid     int32
}

type capUserData struct {
	effective   uint32
	permitted   uint32
	inheritable uint32
}

// RestrictSelfLogNewExecOn is LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
// (Landlock ABI 7): the domain's denials are logged after an execve too,
// that is the program's and its descendants'. A kernel below ABI 7
// refuses any flag (EINVAL), so the parent sets it only from ABI 7.
const RestrictSelfLogNewExecOn = 1 << 1
