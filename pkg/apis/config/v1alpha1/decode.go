package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Override changes a decoded configuration before it is defaulted and validated;
// command-line flags use it to override the file.
type Override func(*SpotterConfiguration)

// Load reads the configuration file at path, applies the overrides, then
// defaults and validates it. The error is an *InvalidError listing every problem,
// each with its field path and line, or a read error.
func Load(path string, overrides ...Override) (*SpotterConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	c, errs := Parse(data, overrides...)
	if len(errs) > 0 {
		return nil, &InvalidError{Path: path, Errors: errs}
	}
	return c, nil
}

// InvalidError is a configuration that does not decode or validate.
type InvalidError struct {
	// Path is the file, when the configuration came from one.
	Path string
	// Errors lists every problem found.
	Errors field.ErrorList
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	fmt.Fprintf(&b, "%d problem(s) in the configuration:", len(e.Errors))
	for _, fe := range e.Errors {
		fmt.Fprintf(&b, "\n  - %s", fe.Error())
	}
	return b.String()
}

// Parse decodes data strictly, applies the overrides and defaults, and validates
// the result. It returns every problem it finds: unknown or duplicate fields,
// values of the wrong type, and values that fail validation. The configuration is
// nil when any problem was found.
func Parse(data []byte, overrides ...Override) (*SpotterConfiguration, field.ErrorList) {
	c, lines, errs := decode(data)
	if c == nil {
		return nil, errs
	}
	decodeErrs := len(errs)
	c, errs = complete(c, errs, overrides)
	// Point validation errors at the line of their field, when the file has it
	// (decoding errors carry their line already).
	for _, e := range errs[decodeErrs:] {
		if line, ok := lines[e.Field]; ok {
			e.Detail = fmt.Sprintf("%s (line %d)", e.Detail, line)
		}
	}
	return c, errs
}

// Complete applies the overrides and defaults to c and validates it; it is Parse
// for a configuration that did not come from a file.
func Complete(c *SpotterConfiguration, overrides ...Override) (*SpotterConfiguration, field.ErrorList) {
	return complete(c, nil, overrides)
}

func complete(c *SpotterConfiguration, errs field.ErrorList, overrides []Override) (*SpotterConfiguration, field.ErrorList) {
	for _, o := range overrides {
		o(c)
	}
	SetDefaults(c)
	errs = append(errs, Validate(c)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Decode reads one YAML or JSON document into a configuration without defaulting
// or validating it. Structural problems (unknown fields, wrong types, a missing
// or foreign apiVersion or kind) are all reported with their paths; the returned
// configuration holds every field that did decode, so that validation can still
// report the rest. It is nil only when the document could not be read at all.
func Decode(data []byte) (*SpotterConfiguration, field.ErrorList) {
	c, _, errs := decode(data)
	return c, errs
}

// decode is Decode that also returns the line of each field path in the file.
func decode(data []byte) (*SpotterConfiguration, map[string]int, field.ErrorList) {
	c := &SpotterConfiguration{}
	lines, errs, ok := decodeStrict(data, c, "the configuration is empty; `spotter config defaults` prints a complete one")
	if !ok {
		return nil, nil, errs
	}

	if c.APIVersion == "" {
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+APIVersion))
	} else if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind == "" {
		errs = append(errs, field.Required(field.NewPath("kind"), "must be "+Kind))
	} else if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	// Validate repeats the apiVersion and kind checks; keep only these.
	c.APIVersion, c.Kind = APIVersion, Kind
	return c, lines, errs
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkNode compares a YAML node with the Go type it decodes into, and records
// unknown fields, duplicate keys and values of the wrong type, each with its path
// and line. It descends into everything, so that one run reports every problem.
func checkNode(n *yaml.Node, t reflect.Type, p *field.Path, lines map[string]int, errs *field.ErrorList) {
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else {
			n = n.Content[0]
		}
	}
	if p != nil {
		lines[p.String()] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an unset field
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(want string) {
		*errs = append(*errs, invalidAt(p, n, "must be "+want))
		// Unset the value, so that decoding the rest of the file still works
		// and validation can report the other fields.
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: n.Line}
	}

	// Types with their own JSON form (durations): let them judge the value.
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		var v any
		if err := n.Decode(&v); err != nil {
			bad("a scalar value")
			return
		}
		j, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(j, reflect.New(t).Interface())
		}
		if err != nil {
			what := "a valid value"
			if t.Name() == "Duration" {
				what = "a duration such as 90s, 5m or 1h30m"
			}
			bad(what)
		}
		return
	}

	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("a mapping of fields")
			return
		}
		fields := jsonFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			fp := child(p, k.Value)
			if seen[k.Value] {
				*errs = append(*errs, withLine(field.Duplicate(fp, k.Value), k))
				continue
			}
			seen[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, invalidAt(fp, k, unknownField(k.Value, fields)))
				continue
			}
			checkNode(v, ft, fp, lines, errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad("a mapping")
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var kp *field.Path
			if p == nil {
				kp = field.NewPath("").Key(k.Value)
			} else {
				kp = p.Key(k.Value)
			}
			if seen[k.Value] {
				*errs = append(*errs, withLine(field.Duplicate(kp, k.Value), k))
				continue
			}
			seen[k.Value] = true
			checkNode(v, t.Elem(), kp, lines, errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("a list")
			return
		}
		for i, item := range n.Content {
			checkNode(item, t.Elem(), p.Index(i), lines, errs)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			bad("a string (quote it)")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			bad("true or false")
		}
	case reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			bad("a whole number")
		} else if _, err := strconv.ParseInt(n.Value, 0, 32); err != nil {
			bad("a whole number that fits in 32 bits")
		}
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			bad("a number")
		}
	default:
		// Every field type of the configuration is handled above; a new one must
		// be added here, which TestEveryFieldTypeIsChecked enforces.
		bad("a value of type " + t.String())
	}
}

// dropNulls removes the fields whose value is null: unset, as if absent. (Some
// JSON forms, such as durations, refuse null.)
func dropNulls(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; v.Kind != yaml.ScalarNode || v.Tag != "!!null" {
				kept = append(kept, n.Content[i], v)
			}
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropNulls(c)
	}
}

// jsonFields maps the JSON names of a struct's fields (inline fields flattened)
// to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func unknownField(name string, fields map[string]reflect.Type) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	msg := "unknown field"
	if s := closest(name, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; fields here: " + strings.Join(known, ", ")
}

// closest returns the known name nearest to name by edit distance, if it is near
// enough to be a likely typo.
func closest(name string, known []string) string {
	best, bestD := "", len(name)/2+2
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

func invalidAt(p *field.Path, n *yaml.Node, detail string) *field.Error {
	if p == nil {
		p = field.NewPath("")
	}
	return withLine(field.Invalid(p, n.Value, detail), n)
}

func withLine(e *field.Error, n *yaml.Node) *field.Error {
	if n.Line > 0 {
		e.Detail = strings.TrimSpace(fmt.Sprintf("%s (line %d)", e.Detail, n.Line))
	}
	return e
}

// sortErrors orders errors by field path, for output that does not depend on map
// iteration order.
func sortErrors(errs field.ErrorList) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
}
