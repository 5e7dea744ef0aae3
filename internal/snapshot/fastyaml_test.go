package snapshot

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/internal/gencluster"
)

// fastCases are documents of the subset the fast path reads (ok) and beside
// them some it must leave to the full parser.
var fastCases = []struct {
	doc string
	ok  bool
}{
	{"a: b\n", true},
	{"a: 1\nb: -2\nc: 0\nd: true\ne: no\nf: ~\ng:\nh: null\n", true},
	{"a: \"x: y # z\"\nb: 'it''s'\nc: \"tab\\tq\\\"u\\u00e9\\x41\"\n", true},
	{"a: b # comment\n# whole line\nc: d\n", true},
	{"list:\n- a\n- b\nnext: c\n", true},
	{"list:\n  - a: 1\n    b: 2\n  - c: 3\n", true},
	{"- - a\n  - b\n- c\n", true},
	{"empty: {}\nnone: []\n", true},
	{"text: |\n  line 1\n    indented\n\n  line 3\nafter: x\n", true},
	{"text: |-\n  no newline\nk: v\n", true},
	{"text: |+\n  keep\n\nk: v\n", true},
	{"\"quoted key\": 1\n'single': 2\n", true},
	{"cpu: 100m\nmemory: 1Gi\nversion: 1.2.3\nname: -foo\nurl: http://x/y\nuid: 910a2dec-8902-4cc1-8eeb-8da1658eec67\n", true},
	{"labels:\n  kubernetes.io/hostname: node-1\n  topology.kubernetes.io/zone: us-east-1a\n", true},
	// Left to the full parser.
	{"a: 1.5\n", false},
	{"a: 017\n", false},
	{"a: 0x1F\n", false},
	{"a: 0b+1\n", false},
	{"a: 2026-01-01T00:00:00Z\n", false},
	{"a: &x 1\nb: *x\n", false},
	{"a: !!str 1\n", false},
	{"a: {b: 1}\n", false},
	{"a: [1, 2]\n", false},
	{"a: >\n  folded\n", false},
	{"a: b\n  c\n", false},
	{"a: 1\na: 2\n", false},
	{"1: a\n", false},
	{"yes: a\n", false},
	{"a:\tb\n", false},
	{"? a\n: b\n", false},
	{"a: \"unterminated\n", false},
	{"a: |2\n  x\n", false},
	{"<<: {}\n", false},
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("the fast path wrote invalid JSON %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("the parser wrote invalid JSON %q: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestFastYAMLMatchesParser(t *testing.T) {
	for _, tc := range fastCases {
		got, ok := fastYAMLToJSON([]byte(tc.doc))
		if ok != tc.ok {
			t.Errorf("%q: fast path ok=%v, want %v", tc.doc, ok, tc.ok)
		}
		if !ok {
			continue
		}
		want, err := yaml.YAMLToJSON([]byte(tc.doc))
		if err != nil {
			t.Errorf("%q: the fast path read what the parser refuses (%v)", tc.doc, err)
			continue
		}
		if !jsonEqual(t, got, want) {
			t.Errorf("%q:\nfast   %s\nparser %s", tc.doc, got, want)
		}
	}
}

// The generated clusters of the benchmarks are read by the fast path whole,
// with the parser's answer.
func TestFastYAMLOnGeneratedCluster(t *testing.T) {
	doc := generatedYAML(t, 40)
	got, ok := fastYAMLToJSON(doc)
	if !ok {
		t.Fatal("the fast path left a generated cluster to the parser")
	}
	want, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, want) {
		t.Error("the fast path and the parser read the generated cluster differently")
	}
}

// generatedYAML is the cluster go run ./hack/gencluster -nodes N writes.
func generatedYAML(t *testing.T, nodes int) []byte {
	t.Helper()
	opts := gencluster.DefaultOptions()
	opts.Nodes = nodes
	c, err := gencluster.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Whatever the fast path reads, the full parser reads alike.
func FuzzFastYAML(f *testing.F) {
	for _, tc := range fastCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, ok := fastYAMLToJSON(doc)
		if !ok {
			return
		}
		want, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%q: the fast path read %s where the parser refuses: %v", doc, got, err)
		}
		if !jsonEqual(t, got, want) {
			t.Fatalf("%q:\nfast   %s\nparser %s", doc, got, want)
		}
	})
}

// The objects decode through json-iterator (itemJSON) as through
// encoding/json: every object of a generated cluster, and objects with the
// fields whose types decode themselves (quantities, times, int-or-strings) in
// every spelling.
func TestItemDecodersAgree(t *testing.T) {
	list, err := yaml.YAMLToJSON(generatedYAML(t, 30))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	items := append(l.Items,
		json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":"2026-01-01T00:00:00Z","deletionTimestamp":null},
			"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":0.5,"memory":"1.5Gi","ephemeral-storage":100}},
			"ports":[{"containerPort":80}],"readinessProbe":{"httpGet":{"port":"http"}},"livenessProbe":{"httpGet":{"port":8080}}}],
			"NodeName":"case-folded","unknownField":{"x":[1,2]}}}`),
		json.RawMessage(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"b"},"spec":{"maxUnavailable":"25%","selector":{"matchLabels":{"a":"b"}}}}`),
		json.RawMessage(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"b"},"spec":{"minAvailable":2}}`),
		json.RawMessage(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"\u00e9\n"}},"status":{"allocatable":{"cpu":"3500m","pods":"110"}}}`),
	)
	for i, item := range items {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(item, &tm); err != nil {
			t.Fatal(err)
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			continue
		}
		std, fast := newObj(), newObj()
		errStd := json.Unmarshal(item, std)
		errFast := itemJSON.Unmarshal(item, fast)
		if (errStd == nil) != (errFast == nil) {
			t.Fatalf("item %d: encoding/json says %v, json-iterator %v", i, errStd, errFast)
		}
		if !reflect.DeepEqual(std, fast) {
			t.Errorf("item %d (%s) decodes differently:\nencoding/json %+v\njson-iterator %+v", i, tm.Kind, std, fast)
		}
	}
}
