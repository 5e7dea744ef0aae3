package metricsauth

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
)

func writePair(t *testing.T, dir, host string) {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CertFile), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func servedHost(t *testing.T, r *reloader) string {
	t.Helper()
	c, err := r.get(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.Subject.CommonName
}

func TestTLSConfigReloadsChangedPair(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := &reloader{cert: filepath.Join(dir, CertFile), key: filepath.Join(dir, KeyFile), clock: clk}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	if got := servedHost(t, r); !strings.HasPrefix(got, "first") {
		t.Fatalf("serves %q, want the first pair", got)
	}
	writePair(t, dir, "second-with-another-size")
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if got := servedHost(t, r); !strings.HasPrefix(got, "second") {
		t.Fatalf("after the files changed, serves %q, want the second pair", got)
	}
	// A broken update keeps the last good pair.
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if got := servedHost(t, r); !strings.HasPrefix(got, "second") {
		t.Fatalf("after a broken update, serves %q, want the last good pair", got)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := TLSConfig(dir)
	if err == nil || !strings.Contains(err.Error(), "tls.crt is missing") {
		t.Fatalf("empty directory: %v, want an error naming tls.crt", err)
	}
	cfg, err := TLSConfig("")
	if err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("self-signed: %v, %d certificates", err, len(cfg.Certificates))
	}
}
