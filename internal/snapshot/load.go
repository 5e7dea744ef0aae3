package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// LoadFile reads a snapshot from a file: YAML or JSON, one List (as written by
// `kubectl get nodes,pods,pdb,pv,pvc,storageclass,csinode -A -o yaml`), several
// documents, or a mix. Objects of other kinds are skipped.
func LoadFile(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	s, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
	}
	return s, nil
}

// Load reads a snapshot from r; see LoadFile.
func Load(r io.Reader) (*Snapshot, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	items, err := splitItems(data)
	if err != nil {
		return nil, err
	}
	return decodeItems(items)
}

// item is one object's source, YAML or JSON, and where it came from.
type item struct {
	where string
	data  []byte
	json  bool
}

// splitItems cuts the input into one chunk per object, without parsing the
// objects themselves: a large cluster's List is then decoded in parallel.
func splitItems(data []byte) ([]item, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty input: expected a List or objects of kinds Node, Pod, PodDisruptionBudget and others")
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return splitJSON(data)
	}
	if items, ok := splitKubectlYAMLList(data); ok {
		return items, nil
	}
	// General YAML: any number of documents, each an object or a List.
	var out []item
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(chunk)) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		items, err := splitJSON(j)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		out = append(out, items...)
	}
}

// splitJSON reads a JSON object, a List, or a stream of them.
func splitJSON(data []byte) ([]item, error) {
	var out []item
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("JSON value %d: %w", n, err)
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("JSON value %d: %w", n, err)
		}
		if strings.HasSuffix(head.Kind, "List") {
			for i, it := range head.Items {
				out = append(out, item{where: fmt.Sprintf("items[%d]", i), data: it, json: true})
			}
			continue
		}
		out = append(out, item{where: fmt.Sprintf("object %d", n), data: raw, json: true})
	}
}

// splitKubectlYAMLList recognises the layout kubectl and most tools write for a
// List (top-level "items:" followed by entries starting with "- " at column 0)
// and cuts it into one YAML document per item, without a full YAML parse.
func splitKubectlYAMLList(data []byte) ([]item, bool) {
	var out []item
	var cur []byte
	inItems := false
	flush := func() {
		if cur != nil {
			out = append(out, item{where: fmt.Sprintf("items[%d]", len(out)), data: cur})
			cur = nil
		}
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if bytes.HasPrefix(line, []byte("---")) {
			return nil, false // several documents
		}
		if bytes.HasPrefix(line, []byte("kind:")) && !bytes.HasSuffix(bytes.TrimSpace(line), []byte("List")) {
			return nil, false // a single object, not a List
		}
		switch {
		case !inItems:
			if bytes.HasPrefix(line, []byte("items:")) {
				if rest := bytes.TrimSpace(line[len("items:"):]); len(rest) > 0 {
					return nil, false // flow style, e.g. "items: []"
				}
				inItems = true
			}
		case bytes.HasPrefix(line, []byte("- ")):
			flush()
			cur = append(cur, "  "...)
			cur = append(cur, line[2:]...)
		case bytes.HasPrefix(line, []byte("  ")) || len(bytes.TrimSpace(line)) == 0:
			if cur == nil && len(bytes.TrimSpace(line)) > 0 {
				return nil, false
			}
			cur = append(cur, line...)
		default:
			// Another top-level key (kind, metadata, ...) after the items.
			flush()
			if !bytes.HasPrefix(line, []byte("kind:")) && !bytes.HasPrefix(line, []byte("metadata:")) && !bytes.HasPrefix(line, []byte("apiVersion:")) {
				return nil, false
			}
			inItems = false
		}
	}
	flush()
	if !inItems && len(out) == 0 {
		return nil, false
	}
	// Each chunk is indented by two spaces; YAML accepts that as a document.
	return out, true
}

// decodeItems decodes every item into its typed object, in parallel, keeping
// the input order.
func decodeItems(items []item) (*Snapshot, error) {
	objs := make([]any, len(items))
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(items); i += workers {
				objs[i], errs[i] = decodeItem(items[i])
			}
		}()
	}
	wg.Wait()
	s := &Snapshot{}
	for i, o := range objs {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", items[i].where, errs[i])
		}
		s.add(o)
	}
	return s, nil
}

// kinds maps "apiVersion/kind" to a constructor of the typed object.
var kinds = map[string]func() any{
	"v1/Node":                        func() any { return &corev1.Node{} },
	"v1/Pod":                         func() any { return &corev1.Pod{} },
	"policy/v1/PodDisruptionBudget":  func() any { return &policyv1.PodDisruptionBudget{} },
	"v1/Namespace":                   func() any { return &corev1.Namespace{} },
	"v1/Service":                     func() any { return &corev1.Service{} },
	"apps/v1/ReplicaSet":             func() any { return &appsv1.ReplicaSet{} },
	"apps/v1/StatefulSet":            func() any { return &appsv1.StatefulSet{} },
	"v1/PersistentVolume":            func() any { return &corev1.PersistentVolume{} },
	"v1/PersistentVolumeClaim":       func() any { return &corev1.PersistentVolumeClaim{} },
	"storage.k8s.io/v1/StorageClass": func() any { return &storagev1.StorageClass{} },
	"storage.k8s.io/v1/CSINode":      func() any { return &storagev1.CSINode{} },
	"v1/ReplicationController":       func() any { return &corev1.ReplicationController{} },
}

func decodeItem(it item) (any, error) {
	data := it.data
	if !it.json {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, err
		}
		data = j
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return nil, errors.New("object without apiVersion and kind")
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, nil // a kind the planner does not read
	}
	obj := newObj()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}
