package main

import (
	"runtime/debug"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	info := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: v}}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		linked string
		info   func() (*debug.BuildInfo, bool)
		want   string
	}{
		{"v1.2.3", info("v0.1.0"), "v1.2.3"},
		{"dev", info("v0.1.0"), "v0.1.0"},
		{"dev", info("v0.1.1-0.20261202000000-0123456789ab+dirty"), "v0.1.1-0.20261202000000-0123456789ab+dirty"},
		{"dev", info("(devel)"), "dev"},
		{"dev", none, "dev"},
	} {
		if got := buildVersion(c.linked, c.info); got != c.want {
			t.Errorf("buildVersion(%q, ...): %q, want %q", c.linked, got, c.want)
		}
	}
}
