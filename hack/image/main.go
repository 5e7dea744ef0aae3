// Command image builds Spotter's container images (see internal/image): it
// cross-compiles spotter and spotter-agent for linux/amd64 and linux/arm64,
// writes both image indexes, each image with the SBOM of its Go modules, to an
// OCI image layout, and with --push pushes them to REPO/spotter:TAG and
// REPO/spotter-agent:TAG. Run it from the module root (`make image`). Progress
// goes to stderr (the digest of each index among it); pushed references, by
// digest, to stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"spotter.dev/spotter/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/oci", "OCI image layout directory to write (replaced)")
	push := flag.String("push", "", "repository prefix to push to, e.g. HOST/PROJECT (images go to PREFIX/spotter:TAG and PREFIX/spotter-agent:TAG)")
	tag := flag.String("tag", "", "tag to push (default: the version, made a valid tag)")
	version := flag.String("version", "", "version to stamp (default: git describe --tags --always --dirty)")
	commit := flag.String("commit", "", "commit to stamp (default: git rev-parse HEAD)")
	source := flag.String("source", "", "org.opencontainers.image.source label (left out when empty)")
	extraCA := flag.String("extra-ca-certs", "", "PEM file of CA certificates to add to the images after the pinned Mozilla roots (default: none)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stamp, err := image.GitStamp(ctx, ".")
	if err != nil {
		return err
	}
	if *version != "" {
		stamp.Version = *version
	}
	if *commit != "" {
		stamp.Commit = *commit
	}
	var plats []v1.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--platforms: %w", err)
		}
		plats = append(plats, *p)
	}
	work, err := os.MkdirTemp("", "spotter-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	idxs, err := image.Build(ctx, image.Options{
		ModuleDir:    ".",
		WorkDir:      work,
		Platforms:    plats,
		Version:      stamp.Version,
		Commit:       stamp.Commit,
		Source:       image.CleanSource(*source),
		Created:      stamp.Created,
		ExtraCACerts: *extraCA,
		Log:          os.Stderr,
	})
	if err != nil {
		return err
	}
	if err := image.WriteLayout(*out, idxs); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (version %s, commit %s, created %s)\n", *out, stamp.Version, stamp.Commit, stamp.Created.Format("2006-01-02T15:04:05Z"))
	if *push == "" {
		return nil
	}
	if *tag == "" {
		*tag = image.Tag(stamp.Version)
	}
	refs, err := image.Push(ctx, strings.TrimSuffix(*push, "/"), *tag, idxs)
	if err != nil {
		return err
	}
	for i, r := range refs {
		fmt.Fprintf(os.Stderr, "image: pushed %s/%s:%s\n", strings.TrimSuffix(*push, "/"), idxs[i].Name, *tag)
		fmt.Println(r.String())
	}
	return nil
}
