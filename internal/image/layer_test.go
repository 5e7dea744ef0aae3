package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

var testCreated = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

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
	ca := CARoots()
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
	if !bytes.Equal(data["etc/ssl/certs/ca-certificates.crt"], ca) {
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
	for name, ca := range map[string][]byte{
		"empty":       nil,
		"no PEM":      []byte("not a certificate\n"),
		"a key block": []byte("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"),
		"not X.509":   []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	} {
		if _, err := BaseLayer(ca, testCreated); err == nil {
			t.Errorf("%s: CA bundle accepted", name)
		}
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
