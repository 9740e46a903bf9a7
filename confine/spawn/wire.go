package spawn

import (
	"time"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// The harness–broker messages, in the wire format of package helper.

func encodeSpec(e *helper.Encoder, s Spec) {
	e.Str(s.Path)
	e.Strs(s.Argv)
	e.Strs(s.Env)
	e.Str(s.Dir)
	e.Str(s.Workspace)
	e.Strs(s.ReadPaths)
	e.Strs(s.WritePaths)
	e.Bool(s.Net)
	e.I64(s.Limits.PidsMax)
	e.I64(s.Limits.MemoryMax)
	e.I64(int64(s.Limits.CPUQuota))
	e.I64(int64(s.Limits.CPUPeriod))
	e.I64(int64(s.Timeout))
	e.I64(s.TmpSize)
}

func decodeSpec(d *helper.Decoder) Spec {
	var s Spec
	s.Path = d.Str()
	s.Argv = d.Strs()
	s.Env = d.Strs()
	s.Dir = d.Str()
	s.Workspace = d.Str()
	s.ReadPaths = d.Strs()
	s.WritePaths = d.Strs()
	s.Net = d.Bool()
	s.Limits.PidsMax = d.I64()
	s.Limits.MemoryMax = d.I64()
	s.Limits.CPUQuota = time.Duration(d.I64())
	s.Limits.CPUPeriod = time.Duration(d.I64())
	s.Timeout = time.Duration(d.I64())
	s.TmpSize = d.I64()
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
	return r
}
