package gencluster

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// WriteTo writes the cluster to w as one YAML List: the nodes, then the pods
// workload by workload, then the PodDisruptionBudgets. It streams: it holds
// one object's YAML at a time, never the whole List. It returns the bytes
// written.
func (c *Cluster) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	lw := &listWriter{out: bufio.NewWriterSize(cw, 1<<20)}
	// A bufio.Writer keeps its first error; the final Flush reports it.
	_, _ = lw.out.WriteString("apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n")
	for i := range c.nodes {
		lw.item(c.nodeObject(i))
	}
	for wi := range c.workloads {
		w := &c.workloads[wi]
		for pi := range w.pods {
			lw.item(c.podObject(w, &w.pods[pi]))
		}
	}
	for wi := range c.workloads {
		if w := &c.workloads[wi]; w.hasPDB {
			lw.item(c.pdbObject(w))
		}
	}
	if lw.err == nil {
		lw.err = lw.out.Flush()
	}
	return cw.n, lw.err
}

// listWriter writes items of a YAML List and keeps the first error.
type listWriter struct {
	out *bufio.Writer
	err error
}

// item writes obj as one element of the List's items: its YAML with the
// first line after "- " and every other line indented by two spaces.
func (l *listWriter) item(obj any) {
	if l.err != nil {
		return
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		l.err = fmt.Errorf("marshalling %T: %w", obj, err)
		return
	}
	// A bufio.Writer keeps its first error: the last write below returns it.
	_, _ = l.out.WriteString("- ")
	for line := range bytes.Lines(bytes.TrimSuffix(b, []byte("\n"))) {
		_, _ = l.out.Write(line)
		if line[len(line)-1] == '\n' {
			_, _ = l.out.WriteString("  ")
		}
	}
	_, l.err = l.out.WriteString("\n")
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFile writes the cluster to the file path, through a temporary file in
// the same directory renamed into place: path never holds part of a cluster,
// and writers of the same path at the same time do not mix their bytes.
func (c *Cluster) WriteFile(path string) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, err
	}
	n, err := c.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return n, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, nil
}
