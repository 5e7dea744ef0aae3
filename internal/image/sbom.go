package image

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SBOMMediaType is the media type of the images' SBOMs, SPDX 2.3 documents in
// JSON (SPDX 2.3, annex "SPDX File Formats"), and the artifactType of the OCI
// artifacts that carry them.
const SBOMMediaType = "application/spdx+json"

// License is the SPDX identifier of Spotter's license (the LICENSE file): the
// org.opencontainers.image.licenses label and the SBOMs' declared license of
// the main module.
const License = "Apache-2.0"

// The fields of an SPDX 2.3 document this package writes (SPDX 2.3 clauses 6,
// 7 and 11); optional fields it has nothing for are left out.
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		SPDXID                string            `json:"SPDXID"`
		Name                  string            `json:"name"`
		VersionInfo           string            `json:"versionInfo,omitempty"`
		DownloadLocation      string            `json:"downloadLocation"`
		FilesAnalyzed         bool              `json:"filesAnalyzed"`
		LicenseDeclared       string            `json:"licenseDeclared,omitempty"`
		PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
		Checksums             []spdxChecksum    `json:"checksums,omitempty"`
		ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	}
	spdxChecksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	}
)

// SBOM returns the SPDX 2.3 JSON document of the Go modules linked into the
// binary name for platform p, as bi (the binary's build information) lists
// them: the main module at version, the standard library at the Go version,
// and every dependency at the version and go.sum hash the build used (a
// replacement's, where go.mod replaces the module; none for a replacement by
// a directory). The document DESCRIBES
// the main module, which DEPENDS_ON each of the others.
//
// The document depends on its arguments only: its time is created, and its
// documentNamespace (unique per document, as SPDX asks) is derived from a
// hash of the rest of its content.
func SBOM(bi *debug.BuildInfo, name string, p v1.Platform, version string, created time.Time) ([]byte, error) {
	if bi.Main.Path == "" {
		return nil, fmt.Errorf("SBOM of %s for %s: the build information names no main module", name, p.String())
	}
	ids := map[string]bool{}
	mod := spdxPackage{
		SPDXID:                spdxID(ids, bi.Main.Path),
		Name:                  bi.Main.Path,
		VersionInfo:           version,
		DownloadLocation:      "NOASSERTION",
		LicenseDeclared:       License,
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          purlRef(bi.Main.Path, version),
	}
	// Vulnerability scanners match the Go standard library as the module
	// "stdlib" at the bare version (the name and purl of syft's Go cataloger).
	goVersion, _, _ := strings.Cut(bi.GoVersion, " ") // "go1.26.8 X:experiment"
	goVersion = strings.TrimPrefix(goVersion, "go")
	pkgs := []spdxPackage{mod, {
		SPDXID:                spdxID(ids, "stdlib"),
		Name:                  "stdlib",
		VersionInfo:           goVersion,
		DownloadLocation:      "NOASSERTION",
		PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs:          purlRef("stdlib", goVersion),
	}}
	deps := slices.Clone(bi.Deps)
	slices.SortFunc(deps, func(a, b *debug.Module) int { return strings.Compare(a.Path, b.Path) })
	for _, d := range deps {
		m := d
		switch {
		case d.Replace != nil && d.Replace.Version == "":
			// Replaced by a directory: the code is no version of any module.
			m = &debug.Module{Path: d.Path}
		case d.Replace != nil:
			m = d.Replace
		}
		pkg := spdxPackage{
			SPDXID:                spdxID(ids, m.Path),
			Name:                  m.Path,
			VersionInfo:           m.Version,
			DownloadLocation:      "NOASSERTION",
			PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs:          purlRef(m.Path, m.Version),
		}
		if sum, ok := h1SHA256(m.Sum); ok {
			pkg.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}}
		}
		pkgs = append(pkgs, pkg)
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        name + "-" + p.OS + "-" + p.Architecture + "-" + version,
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: spotter-hack-image-" + version},
		},
		Packages:      pkgs,
		Relationships: []spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", mod.SPDXID}},
	}
	for _, pkg := range pkgs[1:] {
		doc.Relationships = append(doc.Relationships, spdxRelationship{mod.SPDXID, "DEPENDS_ON", pkg.SPDXID})
	}
	content, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s for %s: %w", name, p.String(), err)
	}
	sum := sha256.Sum256(content)
	doc.DocumentNamespace = "https://spotter.dev/spdx/" + doc.Name + "-" + hex.EncodeToString(sum[:])
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s for %s: %w", name, p.String(), err)
	}
	return append(out, '\n'), nil
}

// spdxID returns an SPDX identifier for the package name, unique among ids
// (SPDX 2.3 clause 7.2: letters, digits, '.' and '-').
func spdxID(ids map[string]bool, name string) string {
	base := "SPDXRef-Package-" + strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '.' || r == '-' || isAlnum(byte(r))) {
			return r
		}
		return '-'
	}, name)
	id := base
	for n := 2; ids[id]; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	ids[id] = true
	return id
}

// purlRef is the package URL of the Go module path at version (purl-spec,
// type golang): pkg:golang/<path>@<version>. The path keeps its case, though
// the purl type asks for lower case: Go module paths are case-sensitive
// (github.com/Azure/... is not github.com/azure/...), and Go's vulnerability
// database and syft key modules by the path as written.
func purlRef(path, version string) []spdxExternalRef {
	purl := "pkg:golang/" + purlEscape(path, true)
	if version != "" {
		purl += "@" + purlEscape(version, false)
	}
	return []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}}
}

// purlEscape percent-encodes every byte of s but the unreserved characters of
// RFC 3986 (and '/' between the segments of a path), as purl-spec asks: a
// version's "+incompatible" becomes "%2Bincompatible".
func purlEscape(s string, path bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || strings.IndexByte("-._~", c) >= 0 || (path && c == '/') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// h1SHA256 turns a go.sum hash ("h1:" and base64) into hex. SPDX has no
// algorithm for Go's dirhash, which is a SHA-256 over the module's file list
// (golang.org/x/mod/sumdb/dirhash, Hash1); like syft, the SBOM gives it as the
// package's SHA256, which a verifier compares with go.sum or the checksum
// database, not with the hash of a download.
func h1SHA256(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
