package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// emptyJSON and emptyMediaType are the OCI empty descriptor's content and
// media type, the config of an artifact that has none (image-spec v1.1.0,
// manifest.md, "Guidance for an Empty Descriptor").
var emptyJSON = []byte("{}")

const emptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"

// Artifact returns the OCI artifact holding blob (of media type artifactType)
// that refers to the manifest subject: an image manifest with that
// artifactType, the empty config, blob as its one layer and subject as its
// subject, the form image-spec v1.1.0 gives artifacts (manifest.md,
// "Guidelines for Artifact Usage"; the separate artifact manifest of the
// release candidates was dropped). Listed in an index, it is written and
// pushed with it; registries with the referrers API list it among the
// subject's referrers, and go-containerregistry keeps the referrers tag
// (sha256-<digest>) of those without. Its created annotation is created.
func Artifact(artifactType string, blob []byte, subject v1.Descriptor, created time.Time) (v1.Image, error) {
	layer := static.NewLayer(blob, types.MediaType(artifactType))
	d, err := layer.Digest()
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", artifactType, err)
	}
	cfg, _, err := v1.SHA256(bytes.NewReader(emptyJSON))
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", artifactType, err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Size: int64(len(emptyJSON)), Digest: cfg},
		Layers:        []v1.Descriptor{{MediaType: types.MediaType(artifactType), Size: int64(len(blob)), Digest: d}},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest},
		Annotations:   map[string]string{LabelCreated: created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", artifactType, err)
	}
	return partial.CompressedToImage(&artifact{manifest: raw, layer: layer})
}

// artifact is the partial.CompressedImageCore of an Artifact.
type artifact struct {
	manifest []byte
	layer    v1.Layer
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyJSON, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}
