package image

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CARoots returns the PEM bundle the images carry at
// /etc/ssl/certs/ca-certificates.crt: Mozilla's NSS roots as the Go team
// publishes them in golang.org/x/crypto/x509roots/fallback/bundle, at the
// version go.mod pins (and go.sum checks). Nothing is read from the build
// machine, so every machine writes the same bytes; updating the roots is a
// `go get` of that module, reviewed like any dependency.
//
// A root the NSS store holds with a constraint (today only a distrust-after
// date, bundle.Root.Constraint) is left out: a PEM file cannot carry the
// constraint, and trusting the root unconstrained would accept certificates
// that Mozilla no longer trusts. The cloud APIs Spotter calls chain to none of
// them.
func CARoots() []byte {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		// Writing to a bytes.Buffer does not fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return buf.Bytes()
}

// caBundle is the CA bundle of the images: CARoots, then the certificates of
// the PEM file extra when it is set (an operator's own CAs, such as a proxy's
// that intercepts TLS).
func caBundle(extra string) ([]byte, error) {
	roots := CARoots()
	if extra == "" {
		return roots, nil
	}
	b, err := os.ReadFile(extra)
	if err != nil {
		return nil, fmt.Errorf("reading the extra CA certificates: %w", err)
	}
	n, err := countCertificates(b)
	if err != nil {
		return nil, fmt.Errorf("extra CA certificates %s: %w", extra, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("extra CA certificates %s: no PEM certificate", extra)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(roots, b...), nil
}

// countCertificates parses every PEM block of b as an X.509 certificate and
// counts them; a block of another type is an error. Text outside the blocks
// (the comments some bundles carry) is skipped, as crypto/x509 does.
func countCertificates(b []byte) (int, error) {
	n := 0
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			return n, nil
		}
		if block.Type != "CERTIFICATE" {
			return n, fmt.Errorf("block %d is a %q, not a CERTIFICATE", n+1, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return n, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
		b = rest
	}
}
