package spawn

import (
	"fmt"
	"os"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// The program is never host root and holds no capability (see
// docs/decisions/0037-child-identity.md). It runs as uid 0 of a user
// namespace of its own, nested in the helper's, whose root is mapped onto
// one unprivileged host id; where the kernel refuses user namespaces (as
// root only), it switches to that id instead. Either way its capability
// sets, bounding set included, are emptied and checked before execve.
//
// The host id is the harness's own when the harness is not root. As root,
// it is the workspace owner's, so what the program creates there belongs
// to that user and a file it leaves behind grants no more than the
// workspace's owner already has. A workspace owned by root is idmapped
// (see idmap.go), or refused where that cannot be done.

// ErrRootWorkspace is returned (wrapped in a *SetupError at the
// "identity" step) when the harness runs as root and the workspace is
// owned by root.
//
// It keeps its identity across the broker: errors.Is works on what a
// Broker returns too.
var ErrRootWorkspace = helper.ErrRootWorkspace

// nogroup is the group a program runs with when the workspace's group is
// root's: gid 0 reads what group root may read.
const nogroup = 65534

// childIdentity returns the host uid and gid the program of a call in
// workspace ws runs as, and whether the workspace must be idmapped (root
// owns it; possible only with a user namespace, useUser).
func (d *direct) childIdentity(ws Pinned, useUser bool) (uid, gid int, idmap bool, err error) {
	if !d.root {
		return os.Geteuid(), os.Getegid(), false, nil
	}
	st, err := ws.stat()
	if err != nil {
		return 0, 0, false, err
	}
	if st.Uid == 0 {
		if !useUser {
			return 0, 0, false, notIdmapped(ws.Path, true, "there is no user namespace to idmap with")
		}
		return idmapUID, idmapUID, true, nil
	}
	uid, gid = int(st.Uid), int(st.Gid)
	if gid == 0 {
		gid = nogroup
	}
	return uid, gid, false, nil
}

// setIdentity fills the plan's identity fields: with a user namespace
// (useUser) the program's namespace nests in the helper's and its root
// maps onto hostUID/hostGID, which in the helper's namespace are 0 when
// the harness is not root (its namespace maps 0 to the harness's ids) and
// the host ids themselves when it is (its namespace maps every id to
// itself); without one the program switches to hostUID/hostGID.
//
// Inside its own namespace the program is that namespace's root, or with
// callerIDs the host ids themselves, so that id(1) and the owner ls shows
// of the files it makes tell the truth (Spec.CallerIDs). Either way it is
// the same host id with no capability.
func setIdentity(pl *helper.Plan, useUser, root, callerIDs bool, hostUID, hostGID int) {
	pl.NestUser = useUser
	switch {
	case useUser && !root:
		pl.ChildUID, pl.ChildGID = 0, 0
	default:
		pl.ChildUID, pl.ChildGID = uint32(hostUID), uint32(hostGID)
	}
	pl.NSUID, pl.NSGID = 0, 0
	if useUser && callerIDs {
		pl.NSUID, pl.NSGID = uint32(hostUID), uint32(hostGID)
	}
}

// Identity is who a run child of a workspace runs as on the host. A plain
// value.
type Identity struct {
	UID, GID int
	// Idmapped is true when the workspace is root's and is bound as an
	// idmapped mount (root on disk is UID for the program).
	Idmapped bool
	// Why says how the ids were chosen, for doctor and the record.
	Why string
}

// String says it in one line.
func (id Identity) String() string {
	return fmt.Sprintf("host uid %d gid %d (%s), no capabilities", id.UID, id.GID, id.Why)
}

// ProbeIdentity says who a run child of workspace ws runs as from this
// process, trying what a call would do: for a root-owned workspace it
// makes (and drops) the idmapped mount. The error, when the workspace
// cannot be given to a run child here, matches ErrRootWorkspace. It must
// be called before the process restricts itself with Landlock.
func ProbeIdentity(ws string) (Identity, error) {
	d := newDirect(Options{})
	pinned, err := Pin(ws)
	if err != nil {
		return Identity{}, err
	}
	uid, gid, idmap, err := d.childIdentity(pinned, true)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{UID: uid, GID: gid, Idmapped: idmap}
	switch {
	case !d.root:
		id.Why = "the harness's own"
	case idmap:
		tree, err := idmappedTree(pinned, idmapUID, true)
		if err != nil {
			return Identity{}, err
		}
		tree.Close()
		id.Why = "nobody: the workspace is root's and is bound idmapped, so what the program creates is root's on disk"
	default:
		id.Why = "the workspace owner's"
	}
	return id, nil
}
