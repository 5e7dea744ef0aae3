// Command gencluster writes the synthetic cluster of internal/gencluster, a
// YAML List of Nodes, Pods and PodDisruptionBudgets, to a file or stdout, and
// a one-line summary of it to stderr:
//
//	go run ./hack/gencluster -nodes 1000 -o FILE
package main

import (
	"flag"
	"fmt"
	"os"

	"spotter.dev/spotter/internal/gencluster"
)

func main() {
	opts := gencluster.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	out := flag.String("o", "-", "file to write (- for stdout)")
	flag.Parse()
	if err := run(opts, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gencluster:", err)
		os.Exit(1)
	}
}

func run(opts gencluster.Options, out string) error {
	c, err := gencluster.Generate(opts)
	if err != nil {
		return err
	}
	var n int64
	if out == "-" {
		if n, err = c.WriteTo(os.Stdout); err != nil {
			err = fmt.Errorf("writing stdout: %w", err)
		}
	} else {
		n, err = c.WriteFile(out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s bytes=%d\n", c.Stats(), n)
	return nil
}
