// Package image builds Spotter's container images without a container engine:
// each binary is cross-compiled (static, CGO_ENABLED=0, -trimpath, version
// stamped through internal/version) and packed with go-containerregistry onto
// layers the project writes itself, never onto a base image fetched from
// elsewhere. Every image has two layers:
//
//   - a base layer shared by all images: /etc/passwd and /etc/group with the
//     non-root user 65532, the CA roots at /etc/ssl/certs/ca-certificates.crt
//     (the cloud SDKs speak TLS) taken from a module go.mod pins, never from
//     the build machine (CARoots), /tmp and the user's home; no shell, no
//     package manager;
//   - the binary, at /usr/local/bin/<name>.
//
// The images of one binary form an OCI image index, one image per platform,
// and with each image an SPDX SBOM of the Go modules linked into its binary,
// an OCI artifact whose subject is the image (sbom.go, artifact.go). The
// output is reproducible: every timestamp is Options.Created (the commit time
// or SOURCE_DATE_EPOCH), tar headers and gzip streams carry nothing of the
// machine, so one commit built with one Go toolchain gives the same digests
// on any machine.
package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Binaries are the programs Spotter ships as images, each built from ./cmd/<name>.
var Binaries = []string{"spotter", "spotter-agent"}

// Platforms are the platforms every image index holds.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// User is the numeric user and group the images run as: not root, and the same
// number as the usual "nonroot" user of minimal images, so volume permissions
// written for those work here too.
const User = 65532

// BinDir is where the binaries live in the images.
const BinDir = "/usr/local/bin"

// Options say what to build. Version, Commit and Created must be set; the rest
// have defaults.
type Options struct {
	// ModuleDir is the root of the Spotter module, where `go build` runs.
	ModuleDir string
	// WorkDir holds the compiled binaries and compressed layers. The images
	// returned by Build read their layers from it: keep it until they are
	// written or pushed.
	WorkDir string
	// Binaries and Platforms default to the package variables of those names.
	Binaries  []string
	Platforms []v1.Platform
	// Version and Commit are stamped into the binaries and the labels.
	Version string
	Commit  string
	// Source is the org.opencontainers.image.source label; empty leaves it out.
	Source string
	// Created is every timestamp of the images and their layers.
	Created time.Time
	// ExtraCACerts is a PEM file of CA certificates added to the images after
	// CARoots; empty (the default) adds none and reads nothing of the machine.
	ExtraCACerts string
	// Go is the go command; default "go".
	Go string
	// Log receives one progress line per step; nil discards them.
	Log io.Writer
}

// Index is the image index of one binary.
type Index struct {
	// Name is the binary's name, also the repository name it is pushed under.
	Name  string
	Index v1.ImageIndex
}

func (o *Options) setDefaults() error {
	if o.Version == "" || o.Commit == "" {
		return fmt.Errorf("version and commit must be set")
	}
	if o.Created.IsZero() {
		return fmt.Errorf("creation time must be set (SOURCE_DATE_EPOCH or the commit time)")
	}
	if o.WorkDir == "" {
		return fmt.Errorf("work directory must be set")
	}
	if len(o.Binaries) == 0 {
		o.Binaries = Binaries
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Created = o.Created.UTC()
	return nil
}

func (o *Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Log, "image: "+format+"\n", args...)
}

// binaryPath is where Compile puts a binary and Assemble reads it.
func (o *Options) binaryPath(p v1.Platform, name string) string {
	return filepath.Join(o.WorkDir, p.OS+"_"+p.Architecture, name)
}

// Build compiles every binary for every platform and assembles their indexes,
// in the order of o.Binaries.
func Build(ctx context.Context, o Options) ([]Index, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	if err := Compile(ctx, o); err != nil {
		return nil, err
	}
	return Assemble(o)
}

// mkdirWork creates the work directory's subdirectory dir.
func mkdirWork(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating work directory: %w", err)
	}
	return nil
}
