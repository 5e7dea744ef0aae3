package snapshot

import (
	"strings"
	"testing"
)

const listYAML = `apiVersion: v1
kind: List
metadata: {}
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels:
      a: b
- apiVersion: v1
  kind: Pod
  metadata:
    name: p1
    namespace: ns
  spec:
    nodeName: n1
    containers:
    - name: c
      image: x

- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata:
    name: pdb
    namespace: ns
  spec:
    maxUnavailable: 1
- apiVersion: v1
  kind: Service
  metadata:
    name: s
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: ignored
`

func TestLoadFormats(t *testing.T) {
	multiDoc := `apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1, namespace: ns}}
- {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: pdb, namespace: ns}}
`
	jsonList := `{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"ns"}},
 {"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"pdb","namespace":"ns"}}]}`
	jsonStream := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}
{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"ns"}}]}
{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"pdb","namespace":"ns"}}`
	for name, in := range map[string]string{"kubectl list": listYAML, "multi-document": multiDoc, "json list": jsonList, "json stream": jsonStream} {
		t.Run(name, func(t *testing.T) {
			s, err := Load(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Nodes) != 1 || len(s.Pods) != 1 || len(s.PDBs) != 1 {
				t.Fatalf("got %s", s.Counts())
			}
			if s.Nodes[0].Name != "n1" || s.Pods[0].Namespace != "ns" || s.PDBs[0].Name != "pdb" {
				t.Errorf("wrong objects: %s %s/%s %s", s.Nodes[0].Name, s.Pods[0].Namespace, s.Pods[0].Name, s.PDBs[0].Name)
			}
		})
	}
	s, err := Load(strings.NewReader(listYAML))
	if err != nil {
		t.Fatal(err)
	}
	if s.Pods[0].Spec.NodeName != "n1" || s.Nodes[0].Labels["a"] != "b" || len(s.Services) != 1 {
		t.Errorf("fields lost: %+v", s.Pods[0].Spec)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty input"},
		{"items:\n- kind: Pod\n  metadata: {name: x}\n", "items[0] (line 2): object without apiVersion and kind"},
		{`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`, "object 1: Pod: json: cannot unmarshal"},
		{"a: [\n", "document 1"},
	} {
		_, err := Load(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}
