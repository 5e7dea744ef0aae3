// Package version tells which Spotter build is running.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are stamped at build time with
// -ldflags "-X spotter.dev/spotter/internal/version.Version=v0.1.0 ...".
// Unstamped builds report the module version and VCS revision Go recorded.
var (
	Version = ""
	Commit  = ""
)

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Kubernetes is the version of the Kubernetes client libraries built in.
	Kubernetes string `json:"kubernetes"`
}

// Get returns the build's version information.
func Get() Info {
	info := Info{
		Version:   Version,
		Commit:    Commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Commit == "" {
				info.Commit = s.Value
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				info.Kubernetes = d.Version
			}
		}
	}
	if info.Version == "" || info.Version == "(devel)" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// String is the one-line form printed by `spotter version`.
func (i Info) String() string {
	return fmt.Sprintf("spotter %s (commit %s, %s, %s, client-go %s)", i.Version, i.Commit, i.GoVersion, i.Platform, i.Kubernetes)
}
