package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// passwd and group name root and the user the images run as. Their shell does
// not exist: nothing can log in, and there is no shell in the image.
var (
	passwd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", User, User)
	group  = fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", User)
)

// entry is one file or directory of a layer.
type entry struct {
	name string // without a leading slash
	mode int64  // permission bits, with sticky where wanted
	uid  int
	dir  bool
	data []byte
}

// baseEntries are the files of the base layer, in the order written.
func baseEntries(caCerts []byte) []entry {
	dir := func(name string, mode int64, uid int) entry {
		return entry{name: name, mode: mode, uid: uid, dir: true}
	}
	file := func(name string, data []byte) entry { return entry{name: name, mode: 0o644, data: data} }
	return []entry{
		dir("etc/", 0o755, 0),
		file("etc/group", []byte(group)),
		file("etc/passwd", []byte(passwd)),
		dir("etc/ssl/", 0o755, 0),
		dir("etc/ssl/certs/", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", caCerts),
		dir("home/", 0o755, 0),
		dir("home/nonroot/", 0o700, User),
		dir("root/", 0o700, 0),
		dir("tmp/", 0o1777, 0),
		dir("usr/", 0o755, 0),
		dir("usr/local/", 0o755, 0),
		dir("usr/local/bin/", 0o755, 0),
	}
}

// header is the tar header of e: every field that could carry something of the
// build machine (times, user and group names) fixed.
func header(e entry, size int64, created time.Time) *tar.Header {
	h := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.uid,
		ModTime: created,
		Format:  tar.FormatPAX,
	}
	if e.dir {
		h.Typeflag = tar.TypeDir
	} else {
		h.Typeflag = tar.TypeReg
		h.Size = size
	}
	return h
}

// gzipWriter compresses deterministically: no name or time in the gzip header.
func gzipWriter(w io.Writer) *gzip.Writer {
	zw, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression) // the level is valid
	return zw
}

// BaseLayer returns the layer every image starts with (see the package
// comment), with the PEM bundle ca as its CA certificates: CARoots, followed
// by the operator's own where Options.ExtraCACerts names them. The layer
// depends on ca and created only.
func BaseLayer(ca []byte, created time.Time) (v1.Layer, error) {
	n, err := countCertificates(ca)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	if n == 0 {
		return nil, errors.New("the CA bundle holds no PEM certificate")
	}
	var buf bytes.Buffer
	zw := gzipWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range baseEntries(ca) {
		if err := tw.WriteHeader(header(e, int64(len(e.data)), created)); err != nil {
			return nil, fmt.Errorf("writing base layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing base layer: %w", err)
		}
	}
	if err := closeAll(tw, zw); err != nil {
		return nil, fmt.Errorf("writing base layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// BinaryLayer writes the layer holding the binary at src as BinDir/name to the
// gzip file dst, and returns it (read from dst).
func BinaryLayer(src, name, dst string, created time.Time) (v1.Layer, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("opening binary: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return nil, fmt.Errorf("opening binary: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return nil, fmt.Errorf("creating layer file: %w", err)
	}
	zw := gzipWriter(out)
	tw := tar.NewWriter(zw)
	e := entry{name: path.Join(BinDir, name)[1:], mode: 0o755}
	if err := tw.WriteHeader(header(e, st.Size(), created)); err != nil {
		out.Close()
		return nil, fmt.Errorf("writing layer of %s: %w", name, err)
	}
	if _, err := io.Copy(tw, in); err != nil {
		out.Close()
		return nil, fmt.Errorf("writing layer of %s: %w", name, err)
	}
	if err := closeAll(tw, zw, out); err != nil {
		return nil, fmt.Errorf("writing layer of %s: %w", name, err)
	}
	return tarball.LayerFromFile(dst, tarball.WithMediaType(types.OCILayer))
}

func closeAll(cs ...io.Closer) error {
	for _, c := range cs {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}
