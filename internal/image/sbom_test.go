package image

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testBuildInfo is what debug/buildinfo reads from a binary built as
// `make image` builds them: the main module without a version (-trimpath,
// -buildvcs=false), a module go.mod replaces, an +incompatible version and a
// module replaced by a directory (no version, no sum).
func testBuildInfo() *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8 X:nodwarf5",
		Path:      "spotter.dev/spotter/cmd/spotter",
		Main:      debug.Module{Path: "spotter.dev/spotter", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.0.0", Replace: &debug.Module{
				Path: "k8s.io/client-go", Version: "v0.37.1", Sum: "h1:QTv/5ha4jAHtW9qxxVBkQVFBRDb4jHfFopQqqMdc+wM="}},
			{Path: "github.com/Azure/go-autorest", Version: "v14.2.0+incompatible", Sum: "h1:V5VMDjClD3GiElqLWO7mz2MxNAK/vTfRHdAubSIPRgs="},
			{Path: "example.test/local", Version: "v1.0.0", Replace: &debug.Module{Path: "../local"}},
		},
	}
}

func parseSBOM(t *testing.T, b []byte) spdxDocument {
	t.Helper()
	var doc spdxDocument
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("SBOM is not an SPDX document of this package's shape: %v\n%s", err, b)
	}
	return doc
}

func TestSBOM(t *testing.T) {
	p := v1.Platform{OS: "linux", Architecture: "arm64"}
	b, err := SBOM(testBuildInfo(), "spotter", p, "v0.1.0", testCreated)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSBOM(t, b)
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
		t.Errorf("header %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	}
	if doc.CreationInfo.Created != "2026-11-23T12:00:00Z" {
		t.Errorf("created %q, want the build's time", doc.CreationInfo.Created)
	}
	type want struct{ version, purl, sha256 string }
	for name, w := range map[string]want{
		"spotter.dev/spotter":          {"v0.1.0", "pkg:golang/spotter.dev/spotter@v0.1.0", ""},
		"stdlib":                       {"1.26.8", "pkg:golang/stdlib@1.26.8", ""},
		"k8s.io/client-go":             {"v0.37.1", "pkg:golang/k8s.io/client-go@v0.37.1", "413bffe616b88c01ed5bdab1c550644151414436f88c77c5a2942aa8c75cfb03"},
		"github.com/Azure/go-autorest": {"v14.2.0+incompatible", "pkg:golang/github.com/Azure/go-autorest@v14.2.0%2Bincompatible", "57954c0e30a50f71a2125a8b58eee6cf63313402bfbd37d11dd02e6d220f460b"},
		"example.test/local":           {"", "pkg:golang/example.test/local", ""},
	} {
		var pkg *spdxPackage
		for i := range doc.Packages {
			if doc.Packages[i].Name == name {
				pkg = &doc.Packages[i]
			}
		}
		if pkg == nil {
			t.Errorf("no package %s", name)
			continue
		}
		if pkg.VersionInfo != w.version {
			t.Errorf("%s: version %q, want %q", name, pkg.VersionInfo, w.version)
		}
		if len(pkg.ExternalRefs) != 1 || pkg.ExternalRefs[0].ReferenceType != "purl" || pkg.ExternalRefs[0].ReferenceLocator != w.purl {
			t.Errorf("%s: references %+v, want purl %s", name, pkg.ExternalRefs, w.purl)
		}
		var sum string
		for _, c := range pkg.Checksums {
			if c.Algorithm == "SHA256" {
				sum = c.ChecksumValue
			}
		}
		if sum != w.sha256 {
			t.Errorf("%s: SHA256 %q, want %q (the go.sum h1 in hex)", name, sum, w.sha256)
		}
	}
	if n := len(doc.Packages); n != 5 {
		t.Errorf("%d packages, want 5", n)
	}
	mod := doc.Packages[0]
	if mod.LicenseDeclared != License || mod.PrimaryPackagePurpose != "APPLICATION" {
		t.Errorf("main module: license %q, purpose %q", mod.LicenseDeclared, mod.PrimaryPackagePurpose)
	}
	describes, dependsOn := 0, 0
	ids := map[string]bool{}
	for _, pkg := range doc.Packages {
		if ids[pkg.SPDXID] {
			t.Errorf("SPDXID %s twice", pkg.SPDXID)
		}
		ids[pkg.SPDXID] = true
	}
	for _, r := range doc.Relationships {
		switch {
		case r.SPDXElementID == "SPDXRef-DOCUMENT" && r.RelationshipType == "DESCRIBES" && r.RelatedSPDXElement == mod.SPDXID:
			describes++
		case r.SPDXElementID == mod.SPDXID && r.RelationshipType == "DEPENDS_ON" && ids[r.RelatedSPDXElement]:
			dependsOn++
		default:
			t.Errorf("relationship %+v", r)
		}
	}
	if describes != 1 || dependsOn != len(doc.Packages)-1 {
		t.Errorf("%d DESCRIBES and %d DEPENDS_ON, want 1 and %d", describes, dependsOn, len(doc.Packages)-1)
	}
}

// The document is a function of its input: the same bytes for the same
// build, and another namespace for another one.
func TestSBOMDeterministic(t *testing.T) {
	p := v1.Platform{OS: "linux", Architecture: "amd64"}
	a, err := SBOM(testBuildInfo(), "spotter", p, "v0.1.0", testCreated)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(testBuildInfo(), "spotter", p, "v0.1.0", testCreated)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("two SBOMs of one build differ")
	}
	bi := testBuildInfo()
	bi.Deps[1].Version = "v14.2.1+incompatible"
	c, err := SBOM(bi, "spotter", p, "v0.1.0", testCreated)
	if err != nil {
		t.Fatal(err)
	}
	na, nc := parseSBOM(t, a).DocumentNamespace, parseSBOM(t, c).DocumentNamespace
	if !strings.HasPrefix(na, "https://spotter.dev/spdx/spotter-linux-amd64-v0.1.0-") || na == nc {
		t.Errorf("namespaces %q and %q: want one per content", na, nc)
	}
}

func TestSBOMRefusesNoMainModule(t *testing.T) {
	bi := testBuildInfo()
	bi.Main = debug.Module{}
	if _, err := SBOM(bi, "spotter", v1.Platform{OS: "linux", Architecture: "amd64"}, "v1", testCreated); err == nil {
		t.Errorf("build information without a main module accepted")
	}
}
