package image

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// baseLayerDiffID is the uncompressed digest of BaseLayer(CARoots(),
// testCreated): the same on every machine, since nothing of the machine goes
// in. It changes when go.mod moves golang.org/x/crypto/x509roots/fallback or
// when the base layer's files change; then write the new value here.
const baseLayerDiffID = "sha256:2cab10c23e06c221a4ea30df0b5ab8cbd161ae7ca1e4513dd0e0eb4775218f4e"

func TestCARoots(t *testing.T) {
	ca := CARoots()
	var subjects []string
	rest := ca
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("block %q in the CA bundle", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("certificate %d: %v", len(subjects)+1, err)
		}
		if !c.IsCA {
			t.Errorf("%s is not a CA", c.Subject)
		}
		subjects = append(subjects, c.Subject.String())
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("text after the last certificate: %q", rest)
	}
	if len(subjects) <= 100 {
		t.Fatalf("%d roots, want more than 100", len(subjects))
	}
	unconstrained := 0
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			unconstrained++
		}
	}
	if len(subjects) != unconstrained {
		t.Errorf("%d roots, want the bundle's %d without a constraint", len(subjects), unconstrained)
	}
	// The roots the clouds' API endpoints chain to.
	all := strings.Join(subjects, "\n")
	for _, want := range []string{"CN=Amazon Root CA 1", "CN=GTS Root R1", "CN=DigiCert Global Root G2"} {
		if !strings.Contains(all, want) {
			t.Errorf("no root %s", want)
		}
	}
	if !bytes.Equal(CARoots(), ca) {
		t.Errorf("two calls give different bundles")
	}
}

// The base layer is pinned: a machine whose layer differs put something of
// its own in.
func TestBaseLayerPinned(t *testing.T) {
	l, err := BaseLayer(CARoots(), testCreated)
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != baseLayerDiffID {
		t.Errorf("base layer %s, pinned %s (after moving the roots module or changing the layer's files, pin the new value)", d, baseLayerDiffID)
	}
}

func TestCABundleExtra(t *testing.T) {
	dir := t.TempDir()
	extra := testCertPEM(t)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := caBundle(write("extra.crt", append([]byte("# our proxy\n"), extra...)))
	if err != nil {
		t.Fatal(err)
	}
	if want := append(CARoots(), append([]byte("# our proxy\n"), extra...)...); !bytes.Equal(got, want) {
		t.Errorf("the extra certificate does not follow the roots")
	}
	if got, err := caBundle(""); err != nil || !bytes.Equal(got, CARoots()) {
		t.Errorf("no extra file: %v, or a bundle other than CARoots", err)
	}
	for name, path := range map[string]string{
		"missing": filepath.Join(dir, "missing.crt"),
		"no PEM":  write("empty.crt", []byte("# nothing\n")),
		"a key":   write("key.pem", []byte("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")),
	} {
		if _, err := caBundle(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// testCertPEM is a self-signed CA certificate, as an operator's extra CA.
func testCertPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "spotter test CA"},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(0, 0).AddDate(100, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
