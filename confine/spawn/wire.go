package spawn

import (
	"maps"
	"slices"
	"time"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// The harness–broker messages, in the wire format of package helper.

func encodeSpec(e *helper.Encoder, s Spec) {
	encodePinned(e, []Pinned{s.Program})
	e.Strs(s.Argv)
	e.Strs(s.Env)
	e.Str(s.Dir)
	encodePinned(e, []Pinned{s.Workspace})
	encodePinned(e, s.ReadPaths)
	encodePinned(e, s.WritePaths)
	e.Bool(s.Net)
	e.I64(s.Limits.PidsMax)
	e.I64(s.Limits.MemoryMax)
	e.I64(int64(s.Limits.CPUQuota))
	e.I64(int64(s.Limits.CPUPeriod))
	e.I64(int64(s.Timeout))
	e.I64(int64(s.Grace))
	e.I64(s.TmpSize)
	e.Strs(s.ReadOnly)
	e.Strs(s.Anchored)
	e.Strs(s.Masked)
	e.U32(uint32(len(s.HeldIDs)))
	for _, p := range slices.Sorted(maps.Keys(s.HeldIDs)) {
		e.Str(p)
		e.U64(s.HeldIDs[p].Dev)
		e.U64(s.HeldIDs[p].Ino)
	}
	e.Bool(s.CallerIDs)
	e.Bool(s.Probe)
	e.I64(int64(s.ProxyPort))
	e.U64(s.NProc)
}

func decodeSpec(d *helper.Decoder) Spec {
	var s Spec
	if prog := decodePinned(d); len(prog) == 1 {
		s.Program = prog[0]
	} else {
		d.Failf("program")
	}
	s.Argv = d.Strs()
	s.Env = d.Strs()
	s.Dir = d.Str()
	if ws := decodePinned(d); len(ws) == 1 {
		s.Workspace = ws[0]
	} else {
		d.Failf("workspace")
	}
	s.ReadPaths = decodePinned(d)
	s.WritePaths = decodePinned(d)
	s.Net = d.Bool()
	s.Limits.PidsMax = d.I64()
	s.Limits.MemoryMax = d.I64()
	s.Limits.CPUQuota = time.Duration(d.I64())
	s.Limits.CPUPeriod = time.Duration(d.I64())
	s.Timeout = time.Duration(d.I64())
	s.Grace = time.Duration(d.I64())
	s.TmpSize = d.I64()
	s.ReadOnly = d.Strs()
	s.Anchored = d.Strs()
	s.Masked = d.Strs()
	if n := d.Count(1+8+8+4, "held identities"); n > 0 {
		s.HeldIDs = make(map[string]FileID, n)
		for range n {
			p := d.Str()
			s.HeldIDs[p] = FileID{Dev: d.U64(), Ino: d.U64()}
		}
	}
	s.CallerIDs = d.Bool()
	s.Probe = d.Bool()
	s.ProxyPort = int(d.I64())
	s.NProc = d.U64()
	return s
}

func encodeResult(e *helper.Encoder, r Result) {
	e.I64(int64(r.ExitCode))
	e.Str(r.Signal)
	e.Bool(r.TimedOut)
	e.Bool(r.OOMKilled)
	e.I64(int64(r.Duration))
	e.I64(r.MemoryPeak)
	e.I64(r.PidsPeak)
	e.Strs(r.Layers)
	e.I64(int64(r.HostUID))
	e.I64(int64(r.HostGID))
	e.Bool(r.LockedView)
	e.Bool(r.Prestarted)
	e.Str(r.DomainName)
	e.Bool(r.SeccompAttributed)
	e.Strs(r.SeccompRefused)
	e.I64(int64(r.SeccompRefusedAll))
	e.Bool(r.NoRouteCounted)
	e.I64(int64(r.NoRoute))
	e.Bool(r.MaskedWatched)
	e.Strs(r.MaskedOpened)
}

func decodeResult(d *helper.Decoder) Result {
	var r Result
	r.ExitCode = int(d.I64())
	r.Signal = d.Str()
	r.TimedOut = d.Bool()
	r.OOMKilled = d.Bool()
	r.Duration = time.Duration(d.I64())
	r.MemoryPeak = d.I64()
	r.PidsPeak = d.I64()
	r.Layers = d.Strs()
	r.HostUID = int(d.I64())
	r.HostGID = int(d.I64())
	r.LockedView = d.Bool()
	r.Prestarted = d.Bool()
	r.DomainName = d.Str()
	r.SeccompAttributed = d.Bool()
	if ops := d.Strs(); len(ops) > 0 {
		r.SeccompRefused = ops
	}
	r.SeccompRefusedAll = int(d.I64())
	r.NoRouteCounted = d.Bool()
	r.NoRoute = int(d.I64())
	r.MaskedWatched = d.Bool()
	if paths := d.Strs(); len(paths) > 0 {
		r.MaskedOpened = paths
	}
	return r
}

// encodePinned writes a list of pinned paths: each its path, device, inode
// and kind.
func encodePinned(e *helper.Encoder, ps []Pinned) {
	e.U32(uint32(len(ps)))
	for _, p := range ps {
		e.Str(p.Path)
		e.U64(p.Dev)
		e.U64(p.Ino)
		e.Bool(p.Dir)
	}
}

func decodePinned(d *helper.Decoder) []Pinned {
	n := d.Count(21, "pinned paths")
	var ps []Pinned
	for i := 0; i < n && d.Err == nil; i++ {
		ps = append(ps, Pinned{Path: d.Str(), Dev: d.U64(), Ino: d.U64(), Dir: d.Bool()})
	}
	return ps
}
