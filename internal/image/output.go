package image

import (
	"context"
	"fmt"
	"os"
	"regexp"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation names an index in an OCI layout (image-layout.md).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout replaces dir with an OCI image layout holding idxs, each named
// (org.opencontainers.image.ref.name) by its binary.
func WriteLayout(dir string, idxs []Index) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the previous layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	for _, ix := range idxs {
		if err := p.AppendIndex(ix.Index, layout.WithAnnotations(map[string]string{refNameAnnotation: ix.Name})); err != nil {
			return fmt.Errorf("writing %s to OCI layout %s: %w", ix.Name, dir, err)
		}
	}
	return nil
}

var badTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag turns a version into a valid tag: characters a tag cannot hold become
// '-', and it is cut to 128 characters.
func Tag(version string) string {
	t := badTagChars.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// Push pushes every index to repo/<binary>:tag and returns the pushed
// references by digest, in the order of idxs. Credentials come from the usual
// keychain (the container tools' config.json); opts are added to the remote
// options (tests pass a transport).
func Push(ctx context.Context, repo, tag string, idxs []Index, opts ...remote.Option) ([]name.Digest, error) {
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	var out []name.Digest
	for _, ix := range idxs {
		ref, err := name.NewTag(repo + "/" + ix.Name + ":" + tag)
		if err != nil {
			return nil, fmt.Errorf("destination of %s: %w", ix.Name, err)
		}
		if err := remote.WriteIndex(ref, ix.Index, opts...); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		d, err := ix.Index.Digest()
		if err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		out = append(out, ref.Context().Digest(d.String()))
	}
	return out, nil
}
