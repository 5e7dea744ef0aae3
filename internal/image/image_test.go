package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const (
	testVersion = "v0.0.0-imagetest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testSource  = "spotter-image-test-source"
)

// The images are built once per test binary: compiling two binaries for two
// platforms is the whole cost of these tests.
var (
	buildOnce sync.Once
	built     []Index
	buildErr  error
	buildOpts Options
	workDir   string
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

// buildImages builds the images for the tests, skipping them under -short.
func buildImages(t *testing.T) []Index {
	t.Helper()
	if testing.Short() {
		t.Skip("builds spotter and spotter-agent for two platforms; skipped with -short")
	}
	buildOnce.Do(func() {
		workDir, buildErr = os.MkdirTemp("", "spotter-image-test-")
		if buildErr != nil {
			return
		}
		buildOpts = Options{
			Platforms: testPlatforms(),
			ModuleDir: "../..",
			WorkDir:   workDir,
			Version:   testVersion,
			Commit:    testCommit,
			Source:    testSource,
			Created:   testCreated,
			Log:       testLog{},
		}
		built, buildErr = Build(context.Background(), buildOpts)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// testPlatforms are the platforms the tests build: this machine's only, so
// that `make test` compiles the binaries once more (with -trimpath) and not
// twice more on a cold cache; SPOTTER_IMAGE_TEST_ALL_PLATFORMS=1 builds every
// platform of Platforms, as `make image` does.
func testPlatforms() []v1.Platform {
	if os.Getenv("SPOTTER_IMAGE_TEST_ALL_PLATFORMS") == "1" {
		return Platforms
	}
	return []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}
}

// testLog shows progress lines with -v.
type testLog struct{}

func (testLog) Write(p []byte) (int, error) {
	if testing.Verbose() {
		return os.Stderr.Write(p)
	}
	return len(p), nil
}

func digests(t *testing.T, idxs []Index) []string {
	t.Helper()
	var ds []string
	for _, ix := range idxs {
		d, err := ix.Index.Digest()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, ix.Name+"@"+d.String())
	}
	return ds
}

// TestImagesThroughRegistry pushes the images to an in-process registry on a
// loopback port, pulls them by digest and checks what a cluster would run.
func TestImagesThroughRegistry(t *testing.T) {
	idxs := buildImages(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/spotter-test"

	refs, err := Push(context.Background(), repo, Tag(testVersion), idxs)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != len(Binaries) {
		t.Fatalf("pushed %d indexes, want %d", len(refs), len(Binaries))
	}
	for i, ref := range refs {
		bin := Binaries[i]
		t.Run(bin, func(t *testing.T) {
			idx, err := remote.Index(ref)
			if err != nil {
				t.Fatalf("pulling %s: %v", ref, err)
			}
			d, _ := idx.Digest()
			if d.String() != ref.DigestStr() {
				t.Errorf("pulled digest %s, pushed %s", d, ref.DigestStr())
			}
			// The tag points at the same index.
			tagged, err := remote.Index(ref.Context().Tag(Tag(testVersion)))
			if err != nil {
				t.Fatal(err)
			}
			if td, _ := tagged.Digest(); td != d {
				t.Errorf("tag %s points at %s, want %s", Tag(testVersion), td, d)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var plats []string
			for _, desc := range im.Manifests {
				if desc.ArtifactType == SBOMMediaType {
					continue
				}
				if desc.Platform == nil {
					t.Fatalf("manifest %s has no platform", desc.Digest)
				}
				plats = append(plats, desc.Platform.String())
				img, err := remote.Image(ref.Context().Digest(desc.Digest.String()))
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, img, bin, *desc.Platform)
				checkReferrers(t, ref.Context().Digest(desc.Digest.String()))
			}
			checkModules(t, bin, checkSBOMs(t, idx))
			slices.Sort(plats)
			var want []string
			for _, p := range testPlatforms() {
				want = append(want, p.String())
			}
			slices.Sort(want)
			if !slices.Equal(plats, want) {
				t.Errorf("platforms %v, want %v", plats, want)
			}
		})
	}
}

// checkImage checks the config and the files of one image, and runs its
// binary when the image is for this machine's platform.
func checkImage(t *testing.T, img v1.Image, bin string, p v1.Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	entry := "/usr/local/bin/" + bin
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{entry}) || cf.Config.WorkingDir != "/" {
		t.Errorf("%s: user %q, entrypoint %q, working dir %q", p, cf.Config.User, cf.Config.Entrypoint, cf.Config.WorkingDir)
	}
	for k, want := range map[string]string{LabelVersion: testVersion, LabelRevision: testCommit, LabelSource: testSource, LabelTitle: bin} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s = %q, want %q", p, k, got, want)
		}
	}
	if !cf.Created.Equal(testCreated) {
		t.Errorf("%s: created %s, want %s", p, cf.Created.Time, testCreated)
	}

	// The files of the image, as a runtime would see them.
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]*tar.Header{}
	var binary []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Name == entry[1:] {
			if binary, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", entry[1:]} {
		if files[f] == nil || files[f].Typeflag != tar.TypeReg {
			t.Errorf("%s: no file /%s", p, f)
		}
	}
	if h := files["etc/ssl/certs/ca-certificates.crt"]; h != nil && h.Size < 1000 {
		t.Errorf("%s: CA bundle of %d bytes", p, h.Size)
	}
	if h := files[entry[1:]]; h != nil && h.Mode&0o111 == 0 {
		t.Errorf("%s: %s not executable (mode %o)", p, entry, h.Mode)
	}
	for _, f := range []string{"bin/sh", "usr/bin/sh", "bin/bash", "bin/busybox"} {
		if files[f] != nil {
			t.Errorf("%s: /%s exists", p, f)
		}
	}
	if bin != "spotter" || p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return
	}
	path := filepath.Join(t.TempDir(), bin)
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", path, err)
	}
	var info struct{ Version, Commit, Platform string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("spotter version -o json: %v\n%s", err, out)
	}
	if info.Version != testVersion || info.Commit != testCommit || info.Platform != p.String() {
		t.Errorf("spotter version from the image: %s; want version %s, commit %s, %s", out, testVersion, testCommit, p)
	}
}

// TestImagesReproducible assembles the images again from the same binaries
// into an OCI layout: the digests must not change. (That `go build -trimpath`
// gives the same binaries for the same commit and toolchain is Go's promise;
// BENCHMARKS.md records two whole `make image` runs giving the same digests.)
func TestImagesReproducible(t *testing.T) {
	first := digests(t, buildImages(t))
	again, err := Assemble(buildOpts)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, again); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	li, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := li.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var fromLayout []string
	for _, desc := range im.Manifests {
		fromLayout = append(fromLayout, desc.Annotations[refNameAnnotation]+"@"+desc.Digest.String())
	}
	if !slices.Equal(first, fromLayout) {
		t.Errorf("digests changed between two assemblies of the same binaries:\n%v\n%v", first, fromLayout)
	}
}

// checkReferrers checks that the registry lists the image's SBOM among its
// referrers, as a tool that starts from the image's digest finds it.
func checkReferrers(t *testing.T, img name.Digest) {
	t.Helper()
	refs, err := remote.Referrers(img)
	if err != nil {
		t.Fatalf("referrers of %s: %v", img, err)
	}
	im, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].ArtifactType != SBOMMediaType {
		t.Errorf("referrers of %s: %+v, want its SBOM", img, im.Manifests)
	}
}

// checkModules checks that each SBOM of binary bin lists the module versions
// go.mod selects (after its replacements), such as client-go's.
func checkModules(t *testing.T, bin string, docs map[v1.Hash]spdxDocument) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "k8s.io/client-go").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/client-go: %v", err)
	}
	want := "pkg:golang/k8s.io/client-go@" + strings.TrimSpace(string(out))
	for d, doc := range docs {
		found := false
		for _, pkg := range doc.Packages {
			for _, r := range pkg.ExternalRefs {
				found = found || r.ReferenceLocator == want
			}
		}
		if !found {
			t.Errorf("%s: the SBOM of %s has no %s", bin, d, want)
		}
		if doc.Packages[0].Name != "spotter.dev/spotter" || doc.Packages[0].VersionInfo != testVersion {
			t.Errorf("%s: the SBOM of %s describes %s %s", bin, d, doc.Packages[0].Name, doc.Packages[0].VersionInfo)
		}
	}
}
