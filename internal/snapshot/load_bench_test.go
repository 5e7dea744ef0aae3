package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/internal/gencluster"
)

// BenchmarkLoadFile loads the 1,000-node cluster of go run ./hack/gencluster
// (36 MB of YAML, 33 MB as JSON), generated in-process into the benchmark's
// temporary directory:
//
//	go test ./internal/snapshot -run '^$' -bench LoadFile -benchtime 3x
func BenchmarkLoadFile(b *testing.B) {
	opts := gencluster.DefaultOptions()
	c, err := gencluster.Generate(opts)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	yamlPath := filepath.Join(dir, "cluster.yaml")
	if _, err := c.WriteFile(yamlPath); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(yamlPath)
	if err != nil {
		b.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		b.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(jsonPath, j, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{yamlPath, jsonPath} {
		b.Run(filepath.Ext(path)[1:], func(b *testing.B) {
			for b.Loop() {
				s, err := LoadFile(path)
				if err != nil {
					b.Fatal(err)
				}
				if len(s.Nodes) != opts.Nodes {
					b.Fatal(fmt.Errorf("%d nodes, want %d", len(s.Nodes), opts.Nodes))
				}
			}
		})
	}
}
