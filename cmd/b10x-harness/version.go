package main

import "runtime/debug"

func init() { version = buildVersion(version, debug.ReadBuildInfo) }

// buildVersion is what --version and the record say: the -X main.version
// given at link time when there is one; otherwise the main module's
// version Go stamped into the build (`go install ...@v0.1.0` gives
// v0.1.0; a build in a git checkout, the tag or a pseudo-version naming
// the commit, "+dirty" with local changes), and "dev" where there is
// neither (a test binary).
func buildVersion(linked string, info func() (*debug.BuildInfo, bool)) string {
	if linked != "dev" {
		return linked
	}
	bi, ok := info()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return linked
	}
	return bi.Main.Version
}
