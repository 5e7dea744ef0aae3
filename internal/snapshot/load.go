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

	jsoniter "github.com/json-iterator/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// DefaultMaxBytes is the largest snapshot LoadFile and Load read. A 5,000-node
// cluster (150,000 pods) written by `kubectl get ... -o yaml` is about 185 MB;
// larger files need Options.MaxBytes (`spotter plan --max-snapshot-bytes`).
const DefaultMaxBytes = 512 << 20

// Options tune how a snapshot is read.
type Options struct {
	// MaxBytes is the most bytes read; a longer input fails with a
	// *TooLargeError as soon as the limit is passed. 0 means DefaultMaxBytes.
	MaxBytes int64
}

// TooLargeError is a snapshot longer than Options.MaxBytes.
type TooLargeError struct {
	// Limit is the most bytes accepted.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the snapshot is larger than %s, the limit", formatBytes(e.Limit))
}

// LoadFile reads a snapshot from a file: YAML or JSON, one List (as written by
// `kubectl get nodes,pods,pdb,pv,pvc,storageclass,csinode -A -o yaml`), several
// documents, or a mix. Objects of other kinds are skipped. It reads at most
// DefaultMaxBytes.
func LoadFile(path string) (*Snapshot, error) { return LoadFileWith(path, Options{}) }

// LoadFileWith is LoadFile with options.
func LoadFileWith(path string, o Options) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	s, err := LoadWith(f, o)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
	}
	return s, nil
}

// Load reads a snapshot from r; see LoadFile.
func Load(r io.Reader) (*Snapshot, error) { return LoadWith(r, Options{}) }

// LoadWith reads a snapshot from r; see LoadFile.
//
// The input is streamed: Lists in the layout kubectl and most tools write
// (items as a block sequence) are cut into items line by line and each item
// is decoded as soon as it is read, in parallel, so that memory holds the
// decoded objects and the items in flight, not the input. JSON is read token
// by token. Other YAML documents are parsed whole. Pods, nodes and
// PodDisruptionBudgets go from their tokens straight into the API types
// (decoder.go), without what nothing that plans reads (compact.go). Every
// object is checked as the API server and kubectl would: objects without a
// name, negative quantities and the same object twice with different
// contents are refused; identical duplicates and pods bound to nodes the
// snapshot lacks are reported in Snapshot.Warnings.
func LoadWith(r io.Reader, o Options) (*Snapshot, error) { return load(r, o, false) }

// loadReference is LoadWith with every object decoded the reference way
// (decodeItem) and kept whole: what LoadWith is checked against.
func loadReference(r io.Reader, o Options) (*Snapshot, error) { return load(r, o, true) }

func load(r io.Reader, o Options, reference bool) (*Snapshot, error) {
	limit := o.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	in := bufio.NewReaderSize(&limitedText{r: r, limit: limit}, 64<<10)
	p := newPipeline(reference)
	err := split(in, p)
	p.finish()
	if err != nil {
		return nil, err
	}
	return assemble(p.slots)
}

// limitedText reads r, failing with a *TooLargeError once more than limit
// bytes were read, and at the first NUL byte, which neither YAML nor JSON
// allows: /dev/zero is refused at once.
type limitedText struct {
	r     io.Reader
	n     int64
	limit int64
}

func (t *limitedText) Read(p []byte) (int, error) {
	if t.n > t.limit {
		return 0, &TooLargeError{Limit: t.limit}
	}
	if room := t.limit + 1 - t.n; int64(len(p)) > room {
		p = p[:room]
	}
	k, err := t.r.Read(p)
	if i := bytes.IndexByte(p[:k], 0); i >= 0 {
		return 0, fmt.Errorf("byte %d is NUL: a snapshot is YAML or JSON text", t.n+int64(i))
	}
	t.n += int64(k)
	if t.n > t.limit {
		return k, &TooLargeError{Limit: t.limit}
	}
	return k, err
}

// split reads the input and hands every object to p.
func split(in *bufio.Reader, p *pipeline) error {
	first, err := firstNonSpace(in)
	if errors.Is(err, io.EOF) {
		return errors.New("empty input: expected a List or objects of kinds Node, Pod, PodDisruptionBudget and others")
	}
	if err != nil {
		return err
	}
	if first == '{' || first == '[' {
		return splitJSON(in, p, "")
	}
	return splitYAML(in, p)
}

// firstNonSpace returns the first byte that is not white space, without
// consuming it.
func firstNonSpace(in *bufio.Reader) (byte, error) {
	for n := 1; ; n *= 2 {
		n = min(n, in.Size())
		b, err := in.Peek(n)
		for _, c := range b {
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				return c, nil
			}
		}
		if err != nil {
			return 0, err
		}
		if n == in.Size() {
			// A buffer of white space: drop it and look further.
			if _, err := in.Discard(n); err != nil {
				return 0, err
			}
		}
	}
}

// splitJSON reads JSON objects and Lists, a stream of them, token by token:
// the items of a List are handed out one by one. where prefixes the
// positions (a YAML document's number).
func splitJSON(r io.Reader, p *pipeline, where string) error {
	dec := json.NewDecoder(r)
	for n := 1; ; n++ {
		at := fmt.Sprintf("%sJSON value %d", where, n)
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if tok == nil {
			continue // null: an empty document
		}
		if tok != json.Delim('{') {
			return fmt.Errorf("%s: expected an object (a List or a Kubernetes object), found %v", at, tok)
		}
		fields := map[string]json.RawMessage{}
		var keys []string
		var items []*slot
		hadItems := false
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			key, _ := kt.(string)
			if key == "items" && !hadItems {
				hadItems = true
				if items, err = jsonItems(dec, p, where, n); err != nil {
					return fmt.Errorf("%s: items: %w", at, err)
				}
				continue
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			if _, dup := fields[key]; !dup {
				keys = append(keys, key)
			}
			fields[key] = raw
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return fmt.Errorf("%s: %w", at, err)
		}
		var kind string
		_ = json.Unmarshal(fields["kind"], &kind)
		if hadItems && strings.HasSuffix(kind, "List") {
			continue
		}
		// An object, not a List: an items field is not its list of objects.
		for _, s := range items {
			s.skip = true
		}
		var obj bytes.Buffer
		obj.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				obj.WriteByte(',')
			}
			kj, _ := json.Marshal(k)
			obj.Write(kj)
			obj.WriteByte(':')
			obj.Write(fields[k])
		}
		obj.WriteByte('}')
		p.dispatch(place{prefix: where, object: true, index: n}, obj.Bytes(), true)
	}
}

// jsonItems hands out the elements of a JSON array one by one.
func jsonItems(dec *json.Decoder, p *pipeline, where string, value int) ([]*slot, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("must be a list, found %v", tok)
	}
	prefix := where
	if value > 1 {
		prefix += fmt.Sprintf("JSON value %d, ", value)
	}
	var out []*slot
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, p.dispatch(place{prefix: prefix, index: i}, raw, true))
	}
	_, err = dec.Token() // the closing bracket
	return out, err
}

// lineReader reads lines, counting them.
type lineReader struct {
	in      *bufio.Reader
	line    int
	scratch []byte
}

// next returns the next line with its end of line, valid until the next call.
func (l *lineReader) next() ([]byte, error) {
	line, err := l.in.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.scratch = append(l.scratch[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.in.ReadSlice('\n')
			l.scratch = append(l.scratch, line...)
		}
		line = l.scratch
	}
	if len(line) > 0 {
		l.line++
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	return line, err
}

// yamlDoc is one YAML document as splitYAML reads it.
type yamlDoc struct {
	n int // its number, from 1
	// rest holds the lines outside the items: the whole document when it is
	// not a List in block layout.
	rest      []byte
	restLine  int
	items     []*slot
	listed    bool // items are being or were handed out
	indent    int  // of the items' dashes
	cur       []byte
	curLine   int
	afterList bool   // the items ended: the lines are the List's other fields
	prefix    string // of the items' places
}

// splitYAML cuts YAML documents, and the items of Lists written as a block
// sequence (kubectl's layout, or indented), line by line: a line at the
// dashes' indentation starting with "- " begins an item, a more indented or
// blank line continues it, a less indented one ends the list. Documents
// without such a list are parsed whole.
func splitYAML(in *bufio.Reader, p *pipeline) error {
	lr := &lineReader{in: in}
	d := &yamlDoc{n: 1}
	for {
		line, err := lr.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) == 0 {
			return d.end(p)
		}
		if marker(line, "---") || marker(line, "...") {
			if err := d.end(p); err != nil {
				return err
			}
			d = &yamlDoc{n: d.n + 1}
			if rest := bytes.TrimSpace(line[3:]); len(rest) > 0 && line[0] == '-' {
				// "--- {...}": a node on the marker line.
				d.add(append(append([]byte(nil), rest...), '\n'), lr.line)
			}
			continue
		}
		if err := d.line(line, lr.line, p); err != nil {
			return err
		}
	}
}

// marker reports whether line is a document marker such as "---".
func marker(line []byte, m string) bool {
	return bytes.HasPrefix(line, []byte(m)) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r' || line[3] == '\n')
}

// add appends a line to the document's lines outside the items.
func (d *yamlDoc) add(line []byte, n int) {
	if d.rest == nil {
		d.restLine = n
	}
	d.rest = append(d.rest, line...)
}

func (d *yamlDoc) line(line []byte, n int, p *pipeline) error {
	spaces := 0
	for spaces < len(line) && line[spaces] == ' ' {
		spaces++
	}
	if d.cur != nil && !d.afterList && spaces > d.indent && spaces < len(line) && line[spaces] > ' ' && line[spaces] < 0x7F {
		// Most lines: within an item, more indented than its dash, not
		// blank (below, as the switch would).
		d.cur = append(d.cur, line[d.indent:]...)
		return nil
	}
	content := bytes.TrimRight(line[spaces:], "\r\n")
	blank := len(bytes.TrimSpace(content)) == 0
	comment := !blank && content[0] == '#'
	dash := len(content) > 0 && content[0] == '-' && (len(content) == 1 || content[1] == ' ' || content[1] == '\t')

	switch {
	case d.listed && d.cur == nil && d.indent < 0:
		// After "items:": the first line of the list says its indentation.
		if blank || comment {
			return nil
		}
		if !dash {
			// Not a block sequence (a mapping, or items is null): parse the
			// document whole. Nothing was handed out yet.
			d.listed = false
			d.add([]byte("items:\n"), n-1)
			d.add(line, n)
			return nil
		}
		d.indent = spaces
		d.startItem(line, n, p)
	case d.listed && !d.afterList:
		switch {
		case dash && spaces == d.indent:
			d.flush(p)
			d.startItem(line, n, p)
		case blank:
			d.cur = append(d.cur, '\n')
		case spaces > d.indent || comment:
			d.cur = append(d.cur, line[min(spaces, d.indent):]...)
		default:
			// Less indented: the list ended; the List's other fields follow.
			d.flush(p)
			d.afterList = true
			d.add(line, n)
		}
	case !d.listed && d.items == nil && spaces == 0 && bytes.HasPrefix(content, []byte("items:")) && emptyValue(content[len("items:"):]):
		d.listed, d.indent = true, -1
	default:
		d.add(line, n)
	}
	return nil
}

// emptyValue reports whether what follows a key is nothing or a comment.
func emptyValue(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || b[0] == '#'
}

// startItem begins an item at a dash line: the dash becomes a space, and the
// item's lines lose the list's indentation, so that each item is a document.
func (d *yamlDoc) startItem(line []byte, n int, p *pipeline) {
	d.cur = append(p.buffer(), line[d.indent:]...)
	d.cur[0] = ' '
	d.curLine = n
}

func (d *yamlDoc) flush(p *pipeline) {
	if d.cur == nil {
		return
	}
	if d.n > 1 && d.prefix == "" {
		d.prefix = fmt.Sprintf("document %d, ", d.n)
	}
	d.items = append(d.items, p.dispatch(place{prefix: d.prefix, index: len(d.items), line: d.curLine}, d.cur, false))
	d.cur = nil
}

// end finishes a document: a List's items are out already; anything else is
// parsed whole.
func (d *yamlDoc) end(p *pipeline) error {
	d.flush(p)
	where := ""
	if d.n > 1 {
		where = fmt.Sprintf("document %d, ", d.n)
	}
	if d.items == nil && d.listed && d.indent < 0 {
		d.listed = false // "items:" and nothing after it
		d.add([]byte("items:\n"), 0)
	}
	if d.items == nil && !d.listed {
		if len(bytes.TrimSpace(d.rest)) == 0 {
			return nil
		}
		j, err := yamlToJSON(d.rest)
		if err != nil {
			return fmt.Errorf("document %d: %w", d.n, excerptError{err})
		}
		return splitJSON(bytes.NewReader(j), p, where)
	}
	// A List: its kind (if it says one) must say so; otherwise the document
	// is an object whose items field is not a list of objects.
	var head struct {
		Kind string `json:"kind"`
	}
	if len(bytes.TrimSpace(d.rest)) > 0 {
		if err := yaml.Unmarshal(d.rest, &head); err != nil {
			return fmt.Errorf("document %d (line %d): %w", d.n, d.restLine, excerptError{err})
		}
	}
	if head.Kind == "" || strings.HasSuffix(head.Kind, "List") {
		return nil
	}
	for _, s := range d.items {
		s.skip = true
	}
	j, err := yaml.YAMLToJSON(d.rest)
	if err != nil {
		return fmt.Errorf("document %d: %w", d.n, excerptError{err})
	}
	return splitJSON(bytes.NewReader(j), p, where)
}

// itemJSON decodes the objects: json-iterator, which reads Kubernetes' types
// (their UnmarshalJSON methods included) as encoding/json does, at a fraction
// of its cost; TestItemDecodersAgree holds it to encoding/json.
var itemJSON = jsoniter.ConfigCompatibleWithStandardLibrary

// yamlToJSON converts YAML to JSON, through the fast path when the text is in
// its subset (fastyaml.go), else through the full parser.
func yamlToJSON(data []byte) ([]byte, error) {
	if j, ok := fastYAMLToJSON(data); ok {
		return j, nil
	}
	return yaml.YAMLToJSON(data)
}

// place says where an object is in the input, for messages: written out
// only when one needs it.
type place struct {
	prefix string // the document or JSON value, when there are several
	object bool   // "object N" (a document's object), not "items[N]"
	index  int
	line   int // of a YAML item's first line
}

func (p place) String() string {
	switch {
	case p.object:
		return fmt.Sprintf("%sobject %d", p.prefix, p.index)
	case p.line > 0:
		return fmt.Sprintf("%sitems[%d] (line %d)", p.prefix, p.index, p.line)
	}
	return fmt.Sprintf("%sitems[%d]", p.prefix, p.index)
}

// slot is one object's place in the input and, once decoded, the object.
type slot struct {
	where place
	obj   any
	err   error
	// skip is set when the object turned out not to be one (an items field
	// of an object that is not a List).
	skip bool
	// quantityErrs are the object's quantities out of bounds (check.go),
	// found where it was decoded.
	quantityErrs field.ErrorList
}

// pipeline decodes objects on every core while the input is being read,
// keeping their input order.
type pipeline struct {
	jobs  chan job
	slots []*slot
	wg    sync.WaitGroup
	// free holds the buffers of YAML items decoded, for the next items.
	free chan []byte
}

type job struct {
	s    *slot
	data []byte
	json bool
}

// newPipeline starts the decoding goroutines: reference ones decode with
// decodeItem alone, and keep the objects whole.
func newPipeline(reference bool) *pipeline {
	workers := runtime.GOMAXPROCS(0)
	p := &pipeline{jobs: make(chan job, 4*workers), free: make(chan []byte, 8*workers)}
	for range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			r := newObjectReader()
			for j := range p.jobs {
				if reference {
					j.s.obj, j.s.err = decodeItem(j.data, j.json)
				} else {
					j.s.obj, j.s.err = r.decode(j.data, j.json)
				}
				if !j.json {
					p.recycle(j.data)
				}
				if j.s.obj != nil {
					j.s.quantityErrs = checkQuantities(j.s.obj)
				}
			}
		}()
	}
	return p
}

// dispatch queues an object for decoding; the bounded queue keeps the input
// read ahead to a few objects.
func (p *pipeline) dispatch(where place, data []byte, isJSON bool) *slot {
	s := &slot{where: where}
	p.slots = append(p.slots, s)
	p.jobs <- job{s: s, data: data, json: isJSON}
	return s
}

// buffer returns an empty buffer for a YAML item.
func (p *pipeline) buffer() []byte {
	select {
	case b := <-p.free:
		return b[:0]
	default:
		return make([]byte, 0, 2048)
	}
}

// recycle hands back the buffer of a YAML item once decoded: nothing decoded
// points into it (the decoders copy what they keep).
func (p *pipeline) recycle(b []byte) {
	if cap(b) > 64<<10 {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}

// finish waits for every queued object.
func (p *pipeline) finish() {
	close(p.jobs)
	p.wg.Wait()
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

// objectReader decodes objects, one goroutine's: its tokenizers and decoder
// keep their buffers and caches from object to object.
type objectReader struct {
	d    *decoder
	yaml fastParser
	json jsonTokenizer
}

func newObjectReader() *objectReader { return &objectReader{d: newDecoder()} }

// decode decodes one object, YAML or JSON, and compacts it (compact.go):
// with the decoder when it reads the object, else with decodeItem (from the
// tokens' JSON when the fast YAML path read the object).
func (r *objectReader) decode(data []byte, isJSON bool) (any, error) {
	if isJSON {
		if toks, ok := r.json.parse(data); ok {
			if obj, ok := r.d.decodeFast(toks); ok {
				return obj, nil
			}
		}
	} else if toks, ok := r.yaml.parse(data); ok {
		if obj, ok := r.d.decodeFast(toks); ok {
			return obj, nil
		}
		data, _ = appendJSON(make([]byte, 0, len(data)), toks, 0)
		isJSON = true
	}
	obj, err := decodeItem(data, isJSON)
	if obj != nil {
		compact(obj)
	}
	return obj, err
}

// decodeItem decodes one object, YAML or JSON; nil for kinds the planner does
// not read. It is the reference decoder: the others must read what it reads.
func decodeItem(data []byte, isJSON bool) (any, error) {
	if !isJSON {
		j, err := yamlToJSON(data)
		if err != nil {
			return nil, excerptError{err}
		}
		data = j
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if itemJSON.Unmarshal(data, &tm) != nil {
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, excerptError{err}
		}
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return nil, errors.New("object without apiVersion and kind")
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, nil // a kind the planner does not read
	}
	obj := newObj()
	if itemJSON.Unmarshal(data, obj) != nil {
		// encoding/json says what is wrong, in the words users know (and
		// decides, should the two ever disagree).
		obj = newObj()
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", tm.Kind, excerptError{err})
		}
	}
	return obj, nil
}

// excerptError shortens the message of an error that may quote its input
// (a time or a quantity that does not parse): never more than an excerpt.
type excerptError struct{ err error }

func (e excerptError) Error() string { return excerpt(e.err.Error(), 300) }

func (e excerptError) Unwrap() error { return e.err }

func excerpt(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:max], ""), len(s))
}

// formatBytes writes a size in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
