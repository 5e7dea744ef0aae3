package v1alpha1

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Override changes a decoded configuration before it is defaulted and validated;
// command-line flags use it to override the file. A problem with a field an
// override changed is not reported at the file's line for that field: the
// value is not the file's.
type Override func(*SpotterConfiguration)

// MaxFileBytes is the largest configuration file Load reads. A complete
// configuration (`spotter config defaults`) is about 2 KiB; even one pricing
// every instance type of a cloud is a few hundred KiB.
const MaxFileBytes = 1 << 20

// Load reads the configuration file at path (at most MaxFileBytes), applies
// the overrides, then defaults and validates it. The error is an
// *InvalidError listing every problem, each with its field path and line, or
// a read error (a *TooLargeError for a file over the limit).
func Load(path string, overrides ...Override) (*SpotterConfiguration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := ReadLimited(f, MaxFileBytes, "the configuration file",
		"is it the right file? A complete configuration (`spotter config defaults`) is about 2 KiB")
	if err != nil {
		return nil, fmt.Errorf("reading configuration %s: %w", path, err)
	}
	c, errs := Parse(data, overrides...)
	if len(errs) > 0 {
		return nil, &InvalidError{Path: path, Errors: errs}
	}
	return c, nil
}

// TooLargeError is an input longer than its reader accepts.
type TooLargeError struct {
	// What was read, such as "the configuration file".
	What string
	// Limit is the most bytes accepted.
	Limit int64
	// Hint says what to do, such as which flag raises the limit.
	Hint string
}

func (e *TooLargeError) Error() string {
	msg := fmt.Sprintf("%s is larger than %s, the limit", e.What, FormatBytes(e.Limit))
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// ReadLimited reads r to its end, or fails with a *TooLargeError (naming
// what, the limit and hint) as soon as it has read more than limit bytes: an
// input that never ends (/dev/zero) is refused promptly, having cost at most
// limit bytes of memory. Other file formats of Spotter (the simulator's
// scenarios and traces) use it too.
func ReadLimited(r io.Reader, limit int64, what, hint string) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, &TooLargeError{What: what, Limit: limit, Hint: hint}
	}
	return buf.Bytes(), nil
}

// FormatBytes writes a size in the largest binary unit that divides it:
// 1 MiB, 512 MiB, 1536 KiB, 100 bytes.
func FormatBytes(n int64) string {
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

// InvalidError is a configuration that does not decode or validate.
type InvalidError struct {
	// Path is the file, when the configuration came from one.
	Path string
	// Errors lists every problem found.
	Errors field.ErrorList
}

// NameFlags adds "(from --flag)" to each problem with a field that a flag set,
// so that a bad flag value is reported as the flag rather than as the file.
// flags maps a field path (such as "agent.metricsBindAddress") to the name of
// the flag that set it; a problem of the field or of anything below it is
// named.
func (e *InvalidError) NameFlags(flags map[string]string) {
	for _, fe := range e.Errors {
		for path, flag := range flags {
			if fe.Field == path || strings.HasPrefix(fe.Field, path+".") || strings.HasPrefix(fe.Field, path+"[") {
				fe.Detail += " (from --" + flag + ")"
			}
		}
	}
}

// maxListed bounds the problems InvalidError prints; the rest are counted.
const maxListed = 100

func (e *InvalidError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	fmt.Fprintf(&b, "%d problem(s) in the configuration:", len(e.Errors))
	for i, fe := range e.Errors {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Errors)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\n  - %s", fe.Error())
	}
	return b.String()
}

// Parse decodes data strictly, applies the overrides and defaults, and validates
// the result. It returns every problem it finds: unknown or duplicate fields,
// values of the wrong type, and values that fail validation. The configuration is
// nil when any problem was found.
func Parse(data []byte, overrides ...Override) (*SpotterConfiguration, field.ErrorList) {
	c, doc, errs := decode(data)
	if c == nil {
		return nil, errs
	}
	var overridden []string
	if len(overrides) > 0 {
		before := c.DeepCopy()
		for _, o := range overrides {
			o(c)
		}
		overridden = changedPaths(before, c)
	}
	SetDefaults(c)
	errs = append(errs, doc.Annotate(Validate(c), func(path string) bool { return under(path, overridden) })...)
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Complete applies the overrides and defaults to c and validates it; it is Parse
// for a configuration that did not come from a file.
func Complete(c *SpotterConfiguration, overrides ...Override) (*SpotterConfiguration, field.ErrorList) {
	for _, o := range overrides {
		o(c)
	}
	SetDefaults(c)
	if errs := Validate(c); len(errs) > 0 {
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

// decode is Decode that also returns what the document says of each field.
func decode(data []byte) (*SpotterConfiguration, *Document, field.ErrorList) {
	c := &SpotterConfiguration{}
	doc, errs := decodeStrict(data, c, "the configuration is empty; `spotter config defaults` prints a complete one")
	if doc == nil {
		return nil, nil, errs
	}

	if c.APIVersion == "" {
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+APIVersion))
	} else if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), Excerpt(c.APIVersion), []string{APIVersion}))
	}
	if c.Kind == "" {
		errs = append(errs, field.Required(field.NewPath("kind"), "must be "+Kind))
	} else if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), Excerpt(c.Kind), []string{Kind}))
	}
	// Validate repeats the apiVersion and kind checks; keep only these.
	c.APIVersion, c.Kind = APIVersion, Kind
	return c, doc, errs
}

// under reports whether path is one of paths or a field below one.
func under(path string, paths []string) bool {
	for _, p := range paths {
		if strings.HasPrefix(path, p) && (len(path) == len(p) || path[len(p)] == '.' || path[len(p)] == '[') {
			return true
		}
	}
	return false
}

// changedPaths lists the field paths at which a and b differ: the fields an
// override set. A list that changed length is one path.
func changedPaths(a, b *SpotterConfiguration) []string {
	var out []string
	diff(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), nil, &out)
	return out
}

func diff(a, b reflect.Value, p *field.Path, out *[]string) {
	record := func() {
		if p != nil {
			*out = append(*out, p.String())
		}
	}
	t := a.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				record()
			}
			return
		}
		diff(a.Elem(), b.Elem(), p, out)
	case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(jsonUnmarshaler):
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			fp := p
			if !strings.Contains(opts, "inline") && (!f.Anonymous || name != "") {
				if name == "" {
					name = f.Name
				}
				fp = child(p, name)
			}
			diff(a.Field(i), b.Field(i), fp, out)
		}
	case t.Kind() == reflect.Map:
		for _, k := range a.MapKeys() {
			kp := field.NewPath("").Key(k.String())
			if p != nil {
				kp = p.Key(k.String())
			}
			if bv := b.MapIndex(k); !bv.IsValid() {
				*out = append(*out, kp.String())
			} else {
				diff(a.MapIndex(k), bv, kp, out)
			}
		}
		for _, k := range b.MapKeys() {
			if !a.MapIndex(k).IsValid() {
				kp := field.NewPath("").Key(k.String())
				if p != nil {
					kp = p.Key(k.String())
				}
				*out = append(*out, kp.String())
			}
		}
	case t.Kind() == reflect.Slice:
		if a.Len() != b.Len() {
			record()
			return
		}
		for i := range a.Len() {
			diff(a.Index(i), b.Index(i), p.Index(i), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			record()
		}
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

// sortErrors orders errors by field path, for output that does not depend on map
// iteration order.
func sortErrors(errs field.ErrorList) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
}
