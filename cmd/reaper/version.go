package main

import "runtime/debug"

// versionString is what `reaper version` prints and the first log line carries.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return describeVersion(version, bi)
}

// describeVersion returns set when it is not empty (a release build's -ldflags "-X main.version=…").
// Otherwise it reads what the Go toolchain recorded in bi, followed by the Go version:
//   - the module version: v1.2.3 for `go install github.com/cgreaper/reaper/cmd/reaper@v1.2.3`, or a
//     pseudo-version holding the commit for a build in a VCS checkout (Go 1.24 and later);
//   - "devel-" and the first 12 digits of the VCS revision when the module version is "(devel)" but a
//     revision was stamped (older toolchains), with "-dirty" for a modified tree;
//   - "(devel)" when nothing is known (a build with -buildvcs=false);
//
// and "(unknown)" when bi is nil (a binary built without module support).
func describeVersion(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "(devel)"
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(12, len(s.Value))]
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			v = "devel-" + rev + dirty
		}
	}
	return v + " " + bi.GoVersion
}
