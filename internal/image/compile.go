package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// versionPkg is the package whose variables -X stamps (see internal/version).
const versionPkg = "spotter.dev/spotter/internal/version"

// Compile cross-compiles every binary for every platform into o.WorkDir, one
// `go build` per platform so that the binaries share its compiled packages.
func Compile(ctx context.Context, o Options) error {
	if err := o.setDefaults(); err != nil {
		return err
	}
	if strings.ContainsAny(o.Version+o.Commit, " \t\n'\"") {
		return fmt.Errorf("version %q and commit %q must not contain spaces or quotes", o.Version, o.Commit)
	}
	pkgs := make([]string, len(o.Binaries))
	for i, b := range o.Binaries {
		pkgs[i] = "./cmd/" + b
	}
	for _, p := range o.Platforms {
		dir := filepath.Dir(o.binaryPath(p, "x"))
		if err := mkdirWork(dir); err != nil {
			return err
		}
		start := time.Now()
		o.logf("compiling %s for %s", strings.Join(o.Binaries, ", "), p.String())
		args := append([]string{"build", "-o", dir + string(filepath.Separator),
			"-trimpath", "-buildvcs=false",
			// -s -w: no symbol table or DWARF (a third of the size); panics
			// still print function names and lines.
			"-ldflags", "-s -w -X " + versionPkg + ".Version=" + o.Version + " -X " + versionPkg + ".Commit=" + o.Commit,
		}, pkgs...)
		cmd := exec.CommandContext(ctx, o.Go, args...)
		cmd.Dir = o.ModuleDir
		cmd.Env = buildEnv(p)
		// A build outlives neither this process (a test killed at its timeout,
		// an interrupted make) nor its context.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s: %w\n%s", p.String(), err, out.Bytes())
		}
		o.logf("compiled for %s in %s", p.String(), time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// buildEnv is the environment of `go build` for p: static (no cgo), and the
// baseline instruction set of each architecture, whatever the caller's
// environment says, so that the binaries run on every machine of the platform
// and the same commit gives the same bytes.
func buildEnv(p v1.Platform) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly")
}
