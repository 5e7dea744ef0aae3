package snapshot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repeating is a reader that never ends: head once, then body forever. It
// counts what was read from it.
type repeating struct {
	head, body string
	pos        int
	read       int64
}

func (r *repeating) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		var src string
		if r.pos < len(r.head) {
			src = r.head[r.pos:]
		} else {
			off := (r.pos - len(r.head)) % len(r.body)
			src = r.body[off:]
		}
		k := copy(p[n:], src)
		n += k
		r.pos += k
	}
	r.read += int64(n)
	return n, nil
}

// An input that never ends is refused once the limit is passed, whatever it
// looks like; the error names the limit, and little more than the limit is
// read.
func TestLoadStopsAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	for name, r := range map[string]*repeating{
		"kubectl list":  {head: "apiVersion: v1\nkind: List\nitems:\n", body: "- {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n"},
		"indented list": {head: "items:\n", body: "  - apiVersion: v1\n    kind: ConfigMap\n"},
		"json list":     {head: `{"kind":"List","items":[`, body: `{"apiVersion":"v1","kind":"ConfigMap"},`},
		"json stream":   {body: `{"apiVersion":"v1","kind":"ConfigMap"}` + "\n"},
		"one long line": {body: "a"},
		"blank lines":   {body: "\n"},
		"documents":     {body: "---\napiVersion: v1\nkind: ConfigMap\n"},
		"one document":  {head: "apiVersion: v1\nkind: ConfigMap\ndata:\n", body: "  k: v\n"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadWith(r, Options{MaxBytes: limit})
			var tl *TooLargeError
			if !errors.As(err, &tl) || !strings.Contains(err.Error(), "larger than 1 MiB") {
				t.Fatalf("got %v, want a *TooLargeError naming 1 MiB", err)
			}
			if r.read > limit+256<<10 {
				t.Errorf("read %d bytes for a limit of %d", r.read, limit)
			}
		})
	}
	// /dev/zero is not text: refused at its first byte.
	r := &repeating{body: "\x00"}
	if _, err := Load(r); err == nil || !strings.Contains(err.Error(), "NUL") || r.read > 256<<10 {
		t.Errorf("zeros: %v after %d bytes", err, r.read)
	}
}

func TestLoadFileRefusesLargeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(listYAML+strings.Repeat("# pad\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFileWith(path, Options{MaxBytes: 4 << 10}); err == nil || !strings.Contains(err.Error(), "larger than 4 KiB") || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v", err)
	}
	if s, err := LoadFileWith(path, Options{MaxBytes: 16 << 10}); err != nil || len(s.Nodes) != 1 {
		t.Errorf("under the limit: %v", err)
	}
}

// A message quotes only an excerpt of a value, however long the value.
func TestLoadErrorsEchoOnlyAnExcerpt(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for name, in := range map[string]string{
		"time":     "items:\n- {apiVersion: v1, kind: Pod, metadata: {name: p, creationTimestamp: \"" + long + "\"}}\n",
		"quantity": "items:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, resources: {requests: {cpu: \"" + long + "\"}}}]}}\n",
		"json":     `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":"` + long + `"}}`,
		"kind":     "items:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {nodeName: [" + long + "]}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(strings.NewReader(in))
			if err == nil {
				t.Fatal("no error")
			}
			if len(err.Error()) > 1000 {
				t.Errorf("a message of %d bytes: %.300s...", len(err.Error()), err)
			}
		})
	}
}

const nodeYAML = "- {apiVersion: v1, kind: Node, metadata: {name: %s}, status: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}}\n"
const podYAML = "- {apiVersion: v1, kind: Pod, metadata: {name: %s, namespace: ns}, spec: {nodeName: %s, containers: [{name: c, resources: {requests: {cpu: %s}}}]}, status: {phase: %s}}\n"

// The same object twice is counted once with a warning when both copies are
// identical, and refused when they differ: which one is the cluster?
func TestLoadDuplicates(t *testing.T) {
	in := "items:\n" + fmt.Sprintf(nodeYAML, "n1") + fmt.Sprintf(podYAML, "p1", "n1", "100m", "Running") +
		fmt.Sprintf(nodeYAML, "n1") + fmt.Sprintf(podYAML, "p1", "n1", "100m", "Running")
	s, err := Load(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 1 || len(s.Pods) != 1 {
		t.Errorf("duplicates counted twice: %s", s.Counts())
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "2 objects appear more than once, identical; each is counted once: Node n1 (items[0] (line 2) and items[2] (line 4)), Pod ns/p1") {
		t.Errorf("warnings: %q", s.Warnings)
	}

	in = "items:\n" + fmt.Sprintf(podYAML, "p1", "n1", "100m", "Running") + fmt.Sprintf(podYAML, "p1", "n1", "200m", "Running")
	if _, err := Load(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "items[1] (line 3): Pod ns/p1 is also items[0] (line 2), with other contents") {
		t.Errorf("conflicting duplicates: %v", err)
	}
}

// Pods bound to nodes the snapshot does not have are reported, not lost in
// silence; finished pods on deleted nodes are normal and not reported.
func TestLoadWarnsOfPodsOnUnknownNodes(t *testing.T) {
	in := "items:\n" + fmt.Sprintf(nodeYAML, "n1") + fmt.Sprintf(podYAML, "p1", "n1", "100m", "Running") +
		fmt.Sprintf(podYAML, "p2", "gone", "100m", "Running") + fmt.Sprintf(podYAML, "p3", "gone", "100m", "Succeeded")
	s, err := Load(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 3 {
		t.Errorf("pods: %d", len(s.Pods))
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "1 pod is bound to a node that is not in the snapshot and is left out of the plan: ns/p2 (node gone)") {
		t.Errorf("warnings: %q", s.Warnings)
	}
}

// Quantities the API server refuses (negative), and those beyond any machine
// that would overflow the planner's sums, are refused with their paths.
func TestLoadRefusesBadQuantities(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{fmt.Sprintf(podYAML, "p1", "n1", "-100m", "Running"),
			`items[0] (line 2): Pod ns/p1: spec.containers[0].resources.requests[cpu]: Invalid value: "-100m": must be 0 or more, as the API server requires`},
		{fmt.Sprintf(podYAML, "p1", "n1", "1e20", "Running"),
			`items[0] (line 2): Pod ns/p1: spec.containers[0].resources.requests[cpu]: Invalid value: "100E": must be at most 1G: no machine has more, and the planner's sums would overflow`},
		{"- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {memory: -1Gi}}}\n",
			`items[0] (line 2): Node n1: status.allocatable[memory]: Invalid value: "-1Gi": must be 0 or more`},
		{"- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {capacity: {memory: 2Ei}}}\n",
			`items[0] (line 2): Node n1: status.capacity[memory]: Invalid value: "2Ei": must be at most 1Pi`},
		{"- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}, spec: {overhead: {cpu: -1}, initContainers: [{name: i, resources: {limits: {memory: -5}}}]}}\n",
			"spec.initContainers[0].resources.limits[memory]: Invalid value: \"-5\""},
		{"- {apiVersion: v1, kind: Pod, metadata: {namespace: ns}}\n", "items[0] (line 2): Pod without metadata.name"},
	} {
		_, err := Load(strings.NewReader("items:\n" + tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// The streaming reader cuts Lists into items without parsing the whole
// document; it must give exactly what parsing the whole document gives.
func TestStreamingAgreesWithWholeDocument(t *testing.T) {
	items := []string{
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {a: b}\n  annotations:\n    note: |\n      - not an item\n      items:\n\n      # not a comment\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ns}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: x\n    args:\n    - \"--a\"\n    # a comment\n    - >-\n      folded\n      text\n",
		"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb, namespace: ns}\nspec: {maxUnavailable: 1}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n",
	}
	layout := func(indent string, dashOwnLine bool) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nitems:\n# a comment before the first item\n")
		for i, it := range items {
			lines := strings.Split(strings.TrimSuffix(it, "\n"), "\n")
			for j, l := range lines {
				switch {
				case j == 0 && dashOwnLine:
					b.WriteString(indent + "-\n" + indent + "  " + l + "\n")
				case j == 0:
					b.WriteString(indent + "- " + l + "\n")
				case l == "":
					b.WriteString("\n")
				default:
					b.WriteString(indent + "  " + l + "\n")
				}
			}
			if i == 1 {
				b.WriteString("\n# a comment between items\n")
			}
		}
		b.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
		return b.String()
	}
	for name, in := range map[string]string{
		"kubectl":            layout("", false),
		"indented":           layout("  ", false),
		"dash on its own":    layout("", true),
		"indented, own dash": layout("    ", true),
		"two documents":      layout("", false) + "---\n" + strings.NewReplacer("n1", "n2", "p1", "p2", "name: pdb", "name: pdb2").Replace(layout("  ", false)),
		"crlf":               strings.ReplaceAll(layout("", false), "\n", "\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Load(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			want := wholeDocuments(t, in)
			if !reflect.DeepEqual(names(got), names(want)) || !reflect.DeepEqual(got.Nodes, want.Nodes) || !reflect.DeepEqual(got.Pods, want.Pods) {
				t.Errorf("streamed %v, whole documents %v\nnode annotations %q vs %q", names(got), names(want), got.Nodes[0].Annotations, want.Nodes[0].Annotations)
			}
		})
	}
}

// wholeDocuments is the obviously right reader: each document parsed whole.
func wholeDocuments(t *testing.T, in string) *Snapshot {
	t.Helper()
	s := &Snapshot{}
	for _, doc := range strings.Split(strings.ReplaceAll(in, "\r\n", "\n"), "---\n") {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := yaml.Unmarshal([]byte(doc), &list); err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			j, err := yaml.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := decodeItem(j, false)
			if err != nil {
				t.Fatal(err)
			}
			s.add(obj)
		}
	}
	return s
}

func names(s *Snapshot) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, "node "+n.Name)
	}
	for _, p := range s.Pods {
		out = append(out, "pod "+p.Namespace+"/"+p.Name)
	}
	for _, p := range s.PDBs {
		out = append(out, "pdb "+p.Namespace+"/"+p.Name)
	}
	return out
}

// Documents that are not Lists in the kubectl layout, and objects with an
// items field that are not Lists, read as before.
func TestLoadOtherShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"flow list":           {"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Node, metadata: {name: n1}}]\n", []string{"node n1"}},
		"items null":          {"apiVersion: v1\nkind: List\nitems:\nmetadata: {}\n", nil},
		"object with items":   {"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n", []string{"node n1"}},
		"json object + items": {`{"apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}],"kind":"Node","metadata":{"name":"n1"}}`, []string{"node n1"}},
		"json kind last":      {`{"apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}],"kind":"NodeList"}`, []string{"node n1"}},
		"comment document":    {"# nothing\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n", []string{"node n1"}},
		"leading blank lines": {"\n\n  \napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n", []string{"node n1"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Load(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

var _ io.Reader = (*repeating)(nil)
