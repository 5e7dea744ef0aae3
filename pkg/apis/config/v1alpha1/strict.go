package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Document is what DecodeStrict learnt about a document besides its values:
// the line of each field, which fields it sets, and which it got wrong.
type Document struct {
	fields map[string]fieldInfo
	bad    map[string]bool
}

// fieldInfo is what a document says of one field.
type fieldInfo struct {
	line int32
	set  bool // a value other than null
}

// Line returns the line of the field at path (as field.Path.String writes it),
// or 0 when the document does not have the field. A field given by an alias
// has the alias's line.
func (d *Document) Line(path string) int { return int(d.fields[path].line) }

// IsSet reports whether the document gives the field at path a value other
// than null. Defaulting uses it to tell a field set to zero from an unset one.
func (d *Document) IsSet(path string) bool { return d.fields[path].set }

// Annotate prepares problems that validation found in the decoded value for
// the reader: it drops those at or below a field that did not decode (already
// reported, and only seen empty by validation), shortens long values to an
// excerpt, and adds the line of each field. overridden, when set, says which
// fields hold a value from elsewhere (a command-line flag): those get no line.
func (d *Document) Annotate(errs field.ErrorList, overridden func(path string) bool) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if d.covered(e.Field) {
			continue
		}
		shorten(e)
		if overridden != nil && overridden(e.Field) {
			out = append(out, e)
			continue
		}
		if f, ok := d.fields[e.Field]; ok {
			e.Detail = fmt.Sprintf("%s (line %d)", e.Detail, f.line)
		}
		out = append(out, e)
	}
	return out
}

// covered reports whether path or a field above it did not decode.
func (d *Document) covered(path string) bool {
	if len(d.bad) == 0 {
		return false
	}
	for i := len(path); i > 0; i-- {
		if i == len(path) || path[i] == '.' || path[i] == '[' {
			if d.bad[path[:i]] {
				return true
			}
		}
	}
	return false
}

// DecodeStrict reads one YAML or JSON document into out, a pointer to a struct,
// the way configuration files are read: unknown fields (with the nearest known
// name suggested), duplicate keys, values of the wrong type and numbers that
// are not finite are all reported, each with its field path and line, and
// every field that is right is still decoded, so that validation can report
// the rest. Aliases are checked where they are used. doc is nil when the
// document could not be read at all.
//
// out's fields may be structs, pointers, maps with string keys, slices,
// strings, bools, int32s, float64s and types with their own JSON form (such as
// metav1.Duration and resource.Quantity); other kinds are reported as errors.
// Other file formats of Spotter (the simulator's scenarios) use it too.
func DecodeStrict(data []byte, out any) (doc *Document, errs field.ErrorList) {
	return decodeStrict(data, out, "the document is empty")
}

// decodeStrict is DecodeStrict with the message for an empty document.
func decodeStrict(data []byte, out any, empty string) (*Document, field.ErrorList) {
	root := field.NewPath("")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var node yaml.Node
	if err := dec.Decode(&node); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, field.ErrorList{field.Required(root, empty)}
		}
		return nil, field.ErrorList{field.Invalid(root, "", excerpt(fmt.Sprintf("not YAML or JSON: %v", err), maxDetail))}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, field.ErrorList{field.Invalid(root, "", "expected one YAML document, found more (remove the extra `---`)")}
	}

	w := &walker{
		doc:    &Document{fields: map[string]fieldInfo{}, bad: map[string]bool{}},
		types:  map[reflect.Type]map[string]reflect.Type{},
		budget: 2*countNodes(&node) + 1000,
	}
	if !w.check(&node, reflect.TypeOf(out), nil, 0) && !w.exhausted && len(w.errs) == 0 {
		w.buf.WriteString("null")
	}
	if w.exhausted {
		return nil, field.ErrorList{field.Invalid(root, "", "the document's aliases expand to too many values: write the values out instead of repeating large anchors")}
	}
	if err := json.Unmarshal(w.buf.Bytes(), out); err != nil && len(w.errs) == 0 {
		// check reports every type error with its path; this is a backstop for
		// any it does not recognise.
		w.errs = append(w.errs, field.Invalid(root, "", excerpt(err.Error(), maxDetail)))
	}
	return w.doc, w.errs
}

// walker checks a YAML node tree against a Go type and writes the JSON of
// what is right, so that encoding/json (and the types' own JSON forms) decode
// it: one pass, no second parse.
type walker struct {
	doc  *Document
	errs field.ErrorList
	buf  bytes.Buffer
	// budget bounds the nodes visited: aliases must not multiply the work.
	budget    int
	exhausted bool
	// types caches the JSON fields of each struct type.
	types map[reflect.Type]map[string]reflect.Type
}

// countNodes counts the nodes of a tree, each alias once.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, ch := range n.Content {
		c += countNodes(ch)
	}
	return c
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// check compares the node n with the Go type t, records unknown fields,
// duplicate keys and values of the wrong type with their path and line, and
// writes the JSON of n to w.buf. It returns false, having written nothing,
// when the value is null (unset) or wrong. via is the line of the alias
// through which n was reached, 0 if none.
func (w *walker) check(n *yaml.Node, t reflect.Type, p *field.Path, via int) bool {
	if w.budget--; w.budget < 0 {
		w.exhausted = true
		return false
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return false
		}
		n = n.Content[0]
	}
	at := position{line: n.Line, via: via}
	if n.Kind == yaml.AliasNode {
		// The field is where the alias is; what is below it, where the anchor is.
		at = position{line: n.Line}
		via = n.Line
		n = n.Alias
	}
	ps := ""
	null := n.Kind == yaml.ScalarNode && n.Tag == "!!null"
	if p != nil {
		ps = p.String()
		w.doc.fields[ps] = fieldInfo{line: int32(at.line), set: !null}
	}
	if null {
		return false // an unset field
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	mark := w.buf.Len()
	bad := func(want string) bool {
		w.errs = append(w.errs, invalidAt(p, n, at, "must be "+want))
		if p != nil {
			w.doc.bad[ps] = true
		}
		w.buf.Truncate(mark)
		return false
	}

	// Types with their own JSON form (durations, quantities): let them judge
	// the value.
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		what := "a valid value"
		switch t.Name() {
		case "Duration":
			what = "a duration such as 90s, 5m or 1h30m"
		case "Quantity":
			what = "a quantity such as 500m, 2 or 4Gi"
		}
		if n.Kind != yaml.ScalarNode {
			return bad(what)
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return bad(what)
		}
		j, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(j, reflect.New(t).Interface())
		}
		if err != nil {
			return bad(what)
		}
		w.buf.Write(j)
		return true
	}

	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad("a mapping of fields")
		}
		fields, ok := w.types[t]
		if !ok {
			fields = jsonFields(t)
			w.types[t] = fields
		}
		w.buf.WriteByte('{')
		first := true
		w.mapping(n, via, p, func(k, v *yaml.Node, vvia int) {
			fp := child(p, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				w.errs = append(w.errs, invalidAt(fp, k, position{line: k.Line, via: vvia}, unknownField(k.Value, fields)))
				return
			}
			first = w.member(k.Value, v, ft, fp, vvia, first)
		})
		w.buf.WriteByte('}')
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return bad("a mapping")
		}
		w.buf.WriteByte('{')
		first := true
		w.mapping(n, via, p, func(k, v *yaml.Node, vvia int) {
			var kp *field.Path
			if p == nil {
				kp = field.NewPath("").Key(k.Value)
			} else {
				kp = p.Key(k.Value)
			}
			first = w.member(k.Value, v, t.Elem(), kp, vvia, first)
		})
		w.buf.WriteByte('}')
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad("a list")
		}
		w.buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if !w.check(item, t.Elem(), p.Index(i), via) {
				w.buf.WriteString("null")
			}
		}
		w.buf.WriteByte(']')
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return bad("a string (quote it)")
		}
		writeString(&w.buf, n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return bad("true or false")
		}
		b, err := strconv.ParseBool(n.Value)
		if err != nil && n.Decode(&b) != nil {
			return bad("true or false")
		}
		w.buf.WriteString(strconv.FormatBool(b))
	case reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad("a whole number")
		}
		// strconv reads what YAML's resolver read (decimal, 0x, 0o, 0b,
		// underscores) without a decoder per value; Decode is the fallback.
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil && n.Decode(&i) != nil {
			return bad("a whole number")
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return bad("a whole number that fits in 32 bits")
		}
		w.buf.WriteString(strconv.FormatInt(i, 10))
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return bad("a number")
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil && n.Decode(&f) != nil {
			return bad("a number")
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return bad("a finite number")
		}
		w.buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default:
		// Every field type of the configuration is handled above; a new one must
		// be added here, which TestEveryFieldTypeIsChecked enforces.
		return bad("a value of type " + t.String())
	}
	return !w.exhausted
}

// mapping calls each for the key-value pairs of a mapping node, reporting
// duplicate keys. Merge keys (<<: *anchor) are expanded as YAML defines them:
// the keys written in the mapping win over merged ones, earlier merged
// mappings over later ones.
func (w *walker) mapping(n *yaml.Node, via int, p *field.Path, each func(k, v *yaml.Node, via int)) {
	seen := map[string]bool{}
	var merges []*yaml.Node
	// Keys count against the budget: an aliased mapping of unknown fields
	// must not be checked a million times.
	if w.budget -= len(n.Content) / 2; w.budget < 0 {
		w.exhausted = true
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if seen[k.Value] {
			w.errs = append(w.errs, invalidDuplicate(child(p, k.Value), k, position{line: k.Line, via: via}))
			continue
		}
		seen[k.Value] = true
		each(k, v, via)
	}
	for _, m := range merges {
		mvia := via
		if m.Kind == yaml.AliasNode {
			if mvia == 0 {
				mvia = m.Line
			}
			m = m.Alias
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, s := range sources {
			svia := mvia
			if s.Kind == yaml.AliasNode {
				if svia == 0 {
					svia = s.Line
				}
				s = s.Alias
			}
			if w.budget -= len(s.Content) / 2; w.budget < 0 {
				w.exhausted = true
				return
			}
			if s.Kind != yaml.MappingNode {
				w.errs = append(w.errs, invalidAt(child(p, "<<"), s, position{line: s.Line, via: svia}, "must be a mapping or a list of mappings to merge"))
				continue
			}
			for i := 0; i+1 < len(s.Content); i += 2 {
				k, v := s.Content[i], s.Content[i+1]
				if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" || seen[k.Value] {
					continue
				}
				seen[k.Value] = true
				each(k, v, svia)
			}
		}
	}
}

// member writes "name":value for one field of a JSON object, or nothing when
// the value is unset or wrong. It returns whether the object is still empty.
func (w *walker) member(name string, v *yaml.Node, t reflect.Type, p *field.Path, via int, first bool) bool {
	mark := w.buf.Len()
	if !first {
		w.buf.WriteByte(',')
	}
	writeString(&w.buf, name)
	w.buf.WriteByte(':')
	if !w.check(v, t, p, via) {
		w.buf.Truncate(mark)
		return first
	}
	return false
}

func writeString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			j, _ := json.Marshal(s) // a string always encodes
			b.Write(j)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// position is where a problem is: the line of the value, and the line of the
// alias through which it was reached, if any.
type position struct{ line, via int }

func (at position) String() string {
	switch {
	case at.line <= 0:
		return ""
	case at.via > 0 && at.via != at.line:
		return fmt.Sprintf("(line %d, through the alias at line %d)", at.line, at.via)
	}
	return fmt.Sprintf("(line %d)", at.line)
}

func invalidAt(p *field.Path, n *yaml.Node, at position, detail string) *field.Error {
	if p == nil {
		p = field.NewPath("")
	}
	e := field.Invalid(p, n.Value, detail)
	shorten(e)
	return withPosition(e, at)
}

func invalidDuplicate(p *field.Path, k *yaml.Node, at position) *field.Error {
	e := field.Duplicate(p, k.Value)
	shorten(e)
	return withPosition(e, at)
}

func withPosition(e *field.Error, at position) *field.Error {
	if s := at.String(); s != "" {
		e.Detail = strings.TrimSpace(e.Detail + " " + s)
	}
	return e
}

// Limits of what a message echoes of its input.
const (
	maxValue  = 64
	maxDetail = 400
	maxField  = 200
)

// shorten cuts the value, the detail and the field path of e to excerpts, so
// that a message never echoes a large part of its input.
func shorten(e *field.Error) {
	e.Field = excerpt(e.Field, maxField)
	e.Detail = excerpt(e.Detail, maxDetail)
	switch v := e.BadValue.(type) {
	case string:
		e.BadValue = excerpt(v, maxValue)
	case int64, int32, int, float64, float32, bool, nil:
	default:
		if j, err := json.Marshal(v); err != nil || len(j) > maxValue {
			e.BadValue = excerpt(fmt.Sprint(v), maxValue)
		}
	}
}

// Excerpt returns s when it is short, or its start and its length: messages
// use it to quote a value without echoing a large part of their input.
func Excerpt(s string) string { return excerpt(s, maxValue) }

func excerpt(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}
