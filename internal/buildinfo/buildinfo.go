// Package buildinfo says which build of simccl's commands is running, for their --version and the
// headers of their JSON outputs.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is a command's version: set, when not empty (the value -ldflags "-X main.versionString=…"
// gave the command), else the main module's version (Go 1.24 stamps a pseudo-version from the
// checkout) with the VCS revision, else "devel"; then the Go release.
func Version(set string) string {
	if set != "" {
		return set
	}
	v := "devel"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if m := bi.Main.Version; m != "" && m != "(devel)" {
		v = m
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && !strings.Contains(v, rev) {
		v += " (" + rev + dirty + ")"
	}
	return v + " " + runtime.Version()
}
