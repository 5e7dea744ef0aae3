package image

import (
	"debug/buildinfo"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Label keys of the OCI image spec's annotations (annotations.md), used as image
// labels and as annotations of the index.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelTitle    = "org.opencontainers.image.title"
	LabelCreated  = "org.opencontainers.image.created"
	LabelLicenses = "org.opencontainers.image.licenses"
)

// Assemble builds the index of every binary from the binaries Compile left in
// o.WorkDir. It does not compile, so the same binaries always give the same
// digests.
func Assemble(o Options) ([]Index, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	ca, err := caBundle(o.ExtraCACerts)
	if err != nil {
		return nil, err
	}
	base, err := BaseLayer(ca, o.Created)
	if err != nil {
		return nil, err
	}
	var out []Index
	for _, name := range o.Binaries {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		var sboms []mutate.IndexAddendum
		for _, p := range o.Platforms {
			img, err := o.image(base, name, p)
			if err != nil {
				return nil, err
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
				Add:        img,
				Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}},
			})
			sbom, err := o.sbom(img, name, p)
			if err != nil {
				return nil, err
			}
			sboms = append(sboms, mutate.IndexAddendum{Add: sbom, Descriptor: v1.Descriptor{ArtifactType: SBOMMediaType}})
		}
		// The SBOMs come after every image: they have no platform, which
		// runtimes rank below a matching one (containerd, containers/image),
		// and a tool that takes the first manifest still gets an image.
		idx = mutate.AppendManifests(idx, sboms...)
		idx, ok := mutate.Annotations(idx, o.labels(name)).(v1.ImageIndex)
		if !ok {
			return nil, fmt.Errorf("annotating the index of %s: not an index", name)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, fmt.Errorf("index of %s: %w", name, err)
		}
		o.logf("%s: index %s", name, d)
		out = append(out, Index{Name: name, Index: idx})
	}
	return out, nil
}

// labels are the image labels (and index annotations) of binary name.
func (o *Options) labels(name string) map[string]string {
	l := map[string]string{
		LabelVersion:  o.Version,
		LabelRevision: o.Commit,
		LabelTitle:    name,
		LabelCreated:  o.Created.Format(time.RFC3339),
		LabelLicenses: License,
	}
	if o.Source != "" {
		l[LabelSource] = o.Source
	}
	return l
}

// image assembles the image of binary name for platform p.
func (o *Options) image(base v1.Layer, name string, p v1.Platform) (v1.Image, error) {
	created := v1.Time{Time: o.Created}
	layerFile := filepath.Join(o.WorkDir, p.OS+"_"+p.Architecture, name+".layer.tar.gz")
	bin, err := BinaryLayer(o.binaryPath(p, name), name, layerFile, o.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "spotter hack/image: passwd, group, CA certificates", Comment: "base"}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "spotter hack/image: " + path.Join(BinDir, name)}},
	)
	if err != nil {
		return nil, fmt.Errorf("image of %s for %s: %w", name, p.String(), err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s for %s: %w", name, p.String(), err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	user := strconv.Itoa(User)
	cf.Config = v1.Config{
		User:       user + ":" + user,
		Entrypoint: []string{path.Join(BinDir, name)},
		WorkingDir: "/",
		Env:        []string{"PATH=" + BinDir},
		Labels:     o.labels(name),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s for %s: %w", name, p.String(), err)
	}
	size, _ := bin.Size()
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image of %s for %s: %w", name, p.String(), err)
	}
	o.logf("%s %s: image %s, binary layer %.1f MB", name, p.String(), d, float64(size)/1e6)
	return img, nil
}

// sbom is the SBOM artifact of img, the image of binary name for platform p:
// the Go modules its binary's build information lists.
func (o *Options) sbom(img v1.Image, name string, p v1.Platform) (v1.Image, error) {
	bi, err := buildinfo.ReadFile(o.binaryPath(p, name))
	if err != nil {
		return nil, fmt.Errorf("reading the build information of %s for %s: %w", name, p.String(), err)
	}
	doc, err := SBOM(bi, name, p, o.Version, o.Created)
	if err != nil {
		return nil, err
	}
	subject, err := partial.Descriptor(img)
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s for %s: %w", name, p.String(), err)
	}
	return Artifact(SBOMMediaType, doc, *subject, o.Created)
}
