package snapshot

import (
	"strings"
	"testing"
)

// FuzzLoad: any input loads or fails with an error, never a panic; what loads
// has names, and every message is short.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(listYAML))
	f.Add([]byte("items:\n  - apiVersion: v1\n    kind: Node\n    metadata: {name: n}\n---\n{\"kind\":\"List\",\"items\":[]}\n"))
	f.Add([]byte(`{"apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}],"kind":"Node","metadata":{"name":"n"}}`))
	f.Add([]byte("items:\n-\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: n}\n  spec: {nodeName: x}\nkind: List\n"))
	f.Add([]byte("--- {apiVersion: v1, kind: Node, metadata: {name: n}}\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := LoadWith(strings.NewReader(string(data)), Options{MaxBytes: 1 << 20})
		if err != nil {
			if len(err.Error()) > 4000 {
				t.Fatalf("a message of %d bytes", len(err.Error()))
			}
			return
		}
		for _, p := range s.Pods {
			if p.Name == "" {
				t.Fatal("a pod without a name was loaded")
			}
		}
	})
}
