package metricsauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Names of the certificate and key files in a certificate directory, as in a
// Secret of type kubernetes.io/tls mounted as a volume.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// TLSConfig returns the TLS configuration of a metrics server. With certDir
// set, it serves the pair tls.crt / tls.key found there and re-reads them when
// either file changes (a mounted Secret is updated in place); a pair that
// cannot be read at start is an error, and a broken update keeps the last good
// pair. With certDir empty, it serves a self-signed certificate made at start:
// the traffic is encrypted, and scrapers skip verification as they do for the
// kubelet's and kube-controller-manager's own metrics.
func TLSConfig(certDir string) (*tls.Config, error) {
	// HTTP/1.1 only: a scrape is one request a connection at a time, and the
	// HTTP/2 server's buffers cost the lean agent memory for nothing.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if certDir == "" {
		pair, err := selfSigned()
		if err != nil {
			return nil, fmt.Errorf("making a self-signed certificate for metrics: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		return cfg, nil
	}
	r := &reloader{cert: filepath.Join(certDir, CertFile), key: filepath.Join(certDir, KeyFile), clock: clock.RealClock{}}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg.GetCertificate = r.get
	return cfg, nil
}

// reloader serves a key pair from files, re-read when their size or time of
// modification changes (checked at most once a second).
type reloader struct {
	cert, key string
	clock     clock.PassiveClock

	mu      sync.Mutex
	pair    *tls.Certificate
	stamp   string
	checked time.Time
}

func (r *reloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.clock.Now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		if s, err := r.fileStamp(); err == nil && s != r.stamp {
			_ = r.loadLocked() // on error the last good pair stays
		}
	}
	return r.pair, nil
}

func (r *reloader) load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadLocked()
}

func (r *reloader) loadLocked() error {
	stamp, err := r.fileStamp()
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("loading the metrics certificate %s and key %s: %w", r.cert, r.key, err)
	}
	r.pair, r.stamp = &pair, stamp
	return nil
}

func (r *reloader) fileStamp() (string, error) {
	var s string
	for _, p := range []string{r.cert, r.key} {
		fi, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("metrics certificate directory: %s is missing (the directory must hold %s and %s)", p, CertFile, KeyFile)
			}
			return "", fmt.Errorf("metrics certificate directory: %w", err)
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// selfSigned makes an ECDSA P-256 certificate for localhost, valid for ten
// years from an hour ago (clock skew). ECDSA keeps start-up fast and small
// where RSA key generation would not.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "spotter-metrics"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Loopback reports whether a bind address (host:port) listens on a loopback
// interface only; ":8080" and "0.0.0.0:8080" listen on every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
