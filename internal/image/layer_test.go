package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

var testCreated = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func writeCA(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// layerFiles reads the uncompressed tar of a layer into headers and contents.
func layerFiles(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	hs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hs[h.Name], data[h.Name] = h, b
	}
}

func TestBaseLayer(t *testing.T) {
	ca := writeCA(t)
	l1, err := BaseLayer(ca, testCreated)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := BaseLayer(ca, testCreated)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l1.Digest()
	d2, _ := l2.Digest()
	if d1 != d2 {
		t.Errorf("two base layers from the same input differ: %s, %s", d1, d2)
	}
	l3, err := BaseLayer(ca, testCreated.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := l3.Digest(); d3 == d1 {
		t.Errorf("the creation time does not reach the layer")
	}

	rc, err := l1.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hs, data := layerFiles(t, rc)
	want, _ := os.ReadFile(ca)
	if !bytes.Equal(data["etc/ssl/certs/ca-certificates.crt"], want) {
		t.Errorf("CA bundle not copied")
	}
	if !bytes.Contains(data["etc/passwd"], []byte("nonroot:x:65532:65532:")) || !bytes.Contains(data["etc/group"], []byte("nonroot:x:65532:")) {
		t.Errorf("no user 65532:\n%s%s", data["etc/passwd"], data["etc/group"])
	}
	for _, name := range []string{"bin/sh", "bin/", "sbin/nologin"} {
		if _, ok := hs[name]; ok {
			t.Errorf("%s in the base layer", name)
		}
	}
	for name, h := range hs {
		if !h.ModTime.Equal(testCreated) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %s, owner %q:%q; want %s and no names", name, h.ModTime, h.Uname, h.Gname, testCreated)
		}
	}
	if h := hs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want mode 1777", h)
	}
	if h := hs["home/nonroot/"]; h == nil || h.Uid != User || h.Gid != User {
		t.Errorf("home/nonroot/: %+v, want owned by %d", h, User)
	}
}

func TestBaseLayerRefusesBadCA(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := BaseLayer(p, testCreated); err == nil {
		t.Errorf("an empty CA bundle was accepted")
	}
	if _, err := BaseLayer(filepath.Join(t.TempDir(), "missing"), testCreated); err == nil {
		t.Errorf("a missing CA bundle was accepted")
	}
}

func TestTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v0.1.0", "v0.1.0"},
		{"1d8e39b-dirty", "1d8e39b-dirty"},
		{"v0.1.0+meta", "v0.1.0-meta"},
		{"-x", "v-x"},
	} {
		if got := Tag(tc.in); got != tc.want {
			t.Errorf("Tag(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCleanSource(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:secret@example.invalid/org/spotter", "https://example.invalid/org/spotter"},
		{"https://example.invalid/org/spotter", "https://example.invalid/org/spotter"},
		{"spotter.dev/spotter", "spotter.dev/spotter"},
		{"git@example.invalid:org/spotter.git", "git@example.invalid:org/spotter.git"},
	} {
		if got := CleanSource(tc.in); got != tc.want {
			t.Errorf("CleanSource(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Assemble puts one image per platform of Platforms in each binary's index,
// each with its platform's binary: checked with stand-in binaries, so that
// `make test` need not cross-compile (the integration test builds this
// machine's platform only; `make image` builds them all).
func TestAssembleEveryPlatform(t *testing.T) {
	o := Options{WorkDir: t.TempDir(), Version: "v1", Commit: "c", Created: time.Unix(1, 0), CACerts: writeCA(t)}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	for _, p := range o.Platforms {
		for _, b := range o.Binaries {
			path := o.binaryPath(p, b)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b+" for "+p.String()), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	idxs, err := Assemble(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(idxs) != len(Binaries) {
		t.Fatalf("%d indexes", len(idxs))
	}
	for _, ix := range idxs {
		im, err := ix.Index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != len(Platforms) {
			t.Fatalf("%s: %d manifests, want %d", ix.Name, len(im.Manifests), len(Platforms))
		}
		for i, desc := range im.Manifests {
			if desc.Platform == nil || desc.Platform.String() != Platforms[i].String() {
				t.Errorf("%s: manifest %d for %v, want %s", ix.Name, i, desc.Platform, Platforms[i])
			}
			img, err := ix.Index.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			_, files := layerFiles(t, mutate.Extract(img))
			if got, want := string(files[strings.TrimPrefix(BinDir, "/")+"/"+ix.Name]), ix.Name+" for "+Platforms[i].String(); got != want {
				t.Errorf("%s on %s: binary %q, want %q", ix.Name, Platforms[i], got, want)
			}
		}
	}
}
