package image

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A stand-in binary is a small Go program, so that it carries the build
// information the SBOMs are read from; it is built once per test binary.
var (
	standInOnce sync.Once
	standInBin  []byte
	standInErr  error
)

// standIns writes a stand-in for every binary of o for every platform: the
// small program followed by "<binary> for <platform>", so that each image's
// binary can be told apart (an ELF file is read through its headers; what
// follows its sections changes nothing). Under -short too: no cross-compiling.
func standIns(t *testing.T, o Options) {
	t.Helper()
	standInOnce.Do(func() {
		dir, err := os.MkdirTemp("", "spotter-image-standin-")
		if err != nil {
			standInErr = err
			return
		}
		defer os.RemoveAll(dir)
		for name, data := range map[string]string{
			"go.mod":  "module spotter.test/standin\n\ngo 1.26\n",
			"main.go": "package main\n\nfunc main() {}\n",
		} {
			if standInErr = os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); standInErr != nil {
				return
			}
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "standin", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			standInErr = err
			t.Logf("%s", out)
			return
		}
		standInBin, standInErr = os.ReadFile(filepath.Join(dir, "standin"))
	})
	if standInErr != nil {
		t.Fatalf("building the stand-in binary: %v", standInErr)
	}
	for _, p := range o.Platforms {
		for _, b := range o.Binaries {
			path := o.binaryPath(p, b)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			data := append(slices.Clip(standInBin), b+" for "+p.String()...)
			if err := os.WriteFile(path, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// assembleStandIns assembles the images of o (defaults set) from stand-in
// binaries.
func assembleStandIns(t *testing.T, o Options) []Index {
	t.Helper()
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	standIns(t, o)
	idxs, err := Assemble(o)
	if err != nil {
		t.Fatal(err)
	}
	return idxs
}

// checkSBOMs checks that idx holds an SBOM artifact for each of its images
// and nothing else beside them: one each, with the image as its subject, no
// platform, and an SPDX document as its one blob. It returns the documents by
// the digest of their image.
func checkSBOMs(t *testing.T, idx v1.ImageIndex) map[v1.Hash]spdxDocument {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	images := map[v1.Hash]bool{}
	var sboms []v1.Descriptor
	for _, desc := range im.Manifests {
		switch {
		case desc.ArtifactType == SBOMMediaType && desc.Platform == nil && desc.MediaType == types.OCIManifestSchema1:
			sboms = append(sboms, desc)
		case desc.Platform != nil:
			images[desc.Digest] = true
		default:
			t.Errorf("index entry %+v is neither an image nor an SBOM", desc)
		}
	}
	docs := map[v1.Hash]spdxDocument{}
	for _, desc := range sboms {
		art, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := art.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := art.RawConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if m.ArtifactType != SBOMMediaType || m.Config.MediaType != emptyMediaType || !bytes.Equal(cfg, emptyJSON) || len(m.Layers) != 1 || m.Layers[0].MediaType != SBOMMediaType {
			t.Errorf("SBOM %s: artifactType %q, config %s %q, layers %+v", desc.Digest, m.ArtifactType, m.Config.MediaType, cfg, m.Layers)
			continue
		}
		if m.Subject == nil || !images[m.Subject.Digest] {
			t.Errorf("SBOM %s: subject %+v is no image of the index", desc.Digest, m.Subject)
			continue
		}
		if _, dup := docs[m.Subject.Digest]; dup {
			t.Errorf("image %s has two SBOMs", m.Subject.Digest)
		}
		ls, err := art.Layers()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ls[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		docs[m.Subject.Digest] = parseSBOM(t, b)
	}
	if len(docs) != len(images) {
		t.Errorf("%d images have an SBOM, of %d", len(docs), len(images))
	}
	return docs
}

// Assemble puts one image per platform of Platforms in each binary's index,
// each with its platform's binary and its SBOM: checked with stand-in
// binaries, so that `make test` need not cross-compile (the integration test
// builds this machine's platform only; `make image` builds them all).
func TestAssembleEveryPlatform(t *testing.T) {
	idxs := assembleStandIns(t, Options{WorkDir: t.TempDir(), Version: "v1", Commit: "c", Created: time.Unix(1, 0)})
	if len(idxs) != len(Binaries) {
		t.Fatalf("%d indexes", len(idxs))
	}
	for _, ix := range idxs {
		im, err := ix.Index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2*len(Platforms) {
			t.Fatalf("%s: %d manifests, want an image and an SBOM for each of %d platforms", ix.Name, len(im.Manifests), len(Platforms))
		}
		for i, desc := range im.Manifests[:len(Platforms)] {
			if desc.Platform == nil || desc.Platform.String() != Platforms[i].String() {
				t.Errorf("%s: manifest %d for %v, want %s", ix.Name, i, desc.Platform, Platforms[i])
			}
			img, err := ix.Index.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			_, files := layerFiles(t, mutate.Extract(img))
			if got, want := string(files[strings.TrimPrefix(BinDir, "/")+"/"+ix.Name]), ix.Name+" for "+Platforms[i].String(); !strings.HasSuffix(got, want) {
				t.Errorf("%s on %s: binary ending %q, want %q", ix.Name, Platforms[i], got[max(0, len(got)-len(want)):], want)
			}
		}
		for d, doc := range checkSBOMs(t, ix.Index) {
			if len(doc.Packages) != 2 || doc.Packages[0].Name != "spotter.test/standin" || doc.Packages[0].VersionInfo != "v1" {
				t.Errorf("%s: SBOM of %s: %+v", ix.Name, d, doc.Packages)
			}
		}
	}
}

// The same binaries give the same digests whatever the machine has: here a
// CA bundle where Go looks for one (SSL_CERT_FILE, SSL_CERT_DIR) against
// none, and other work and temporary directories.
func TestAssembleIgnoresTheHost(t *testing.T) {
	assemble := func(hostCA bool) []string {
		tmp := t.TempDir()
		if hostCA {
			ca := filepath.Join(tmp, "host-ca.crt")
			if err := os.WriteFile(ca, testCertPEM(t), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("SSL_CERT_FILE", ca)
			t.Setenv("SSL_CERT_DIR", tmp)
		} else {
			t.Setenv("SSL_CERT_FILE", filepath.Join(tmp, "missing.crt"))
			t.Setenv("SSL_CERT_DIR", filepath.Join(tmp, "missing"))
		}
		t.Setenv("TMPDIR", tmp)
		return digests(t, assembleStandIns(t, Options{WorkDir: filepath.Join(tmp, "work"), Version: "v1", Commit: "c", Created: testCreated}))
	}
	with, without := assemble(true), assemble(false)
	if !slices.Equal(with, without) {
		t.Errorf("a CA bundle on the machine changed the images:\n%v\n%v", with, without)
	}
}
