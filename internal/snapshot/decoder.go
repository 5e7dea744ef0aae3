package snapshot

import (
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// decoder reads tokens (tokens.go) into the API types, for the kinds that
// make up nearly all of a snapshot (decodekinds.go): the fields they hold
// most often by hand, every other field through json-iterator on the JSON of
// that field alone. It answers exactly what decoding the object's JSON with
// json-iterator answers (then compacted, compact.go), or gives up: anything
// it is not sure to read alike (a value of another type than the field's, a
// key that matches a field only when case is ignored, a null where a map's
// value should be, an escape in a JSON quantity) sets bad, and the object is
// decoded the reference way (decodeItem), which also writes the error
// message. TestDecoderAgrees and FuzzDecoder hold it to that.
//
// One decoder serves one goroutine; its caches live as long as it does.
type decoder struct {
	toks []token
	pos  int
	bad  bool

	strs     strArena
	interned map[string]string
	// quantities and times remember what each spelling parsed to: a
	// snapshot repeats a few hundred of them over and over.
	quantities map[string]resource.Quantity
	times      map[string]metav1.Time
	jbuf       []byte
}

func newDecoder() *decoder {
	return &decoder{
		interned:   map[string]string{},
		quantities: map[string]resource.Quantity{},
		times:      map[string]metav1.Time{},
	}
}

// maxInterned bounds the strings a decoder keeps to share, and maxCached
// the quantities and times it remembers: enough for the label keys and
// values, namespaces, node names, images and quantities of a large cluster;
// beyond them new strings are copied, not shared.
const (
	maxInterned    = 1 << 17
	maxInternedLen = 256
	maxCached      = 1 << 12
)

// reset starts an object.
func (d *decoder) reset(toks []token) {
	d.toks, d.pos, d.bad = toks, 0, false
}

func (d *decoder) fail() { d.bad = true }

// kind returns the kind of the current token; tokEnd once bad, so that every
// loop over entries ends.
func (d *decoder) kind() tokKind {
	if d.bad {
		return tokEnd
	}
	return d.toks[d.pos].kind
}

// skip moves past the current value.
func (d *decoder) skip() {
	if !d.bad {
		d.pos = skipValue(d.toks, d.pos)
	}
}

// enterMap moves into the mapping at the current token and reports whether
// there is one: false for null (which leaves a struct as it is), false and
// bad for anything else.
func (d *decoder) enterMap() bool {
	_, ok := d.enter(tokMap)
	return ok
}

// firstKey moves into the mapping at the current token and returns its
// first key, as enterMap and key do: ok=false for an empty mapping and for
// null (which leaves a struct as it is), and bad for anything else.
func (d *decoder) firstKey() (key []byte, ok bool) {
	if !d.enterMap() {
		return nil, false
	}
	return d.key()
}

// key returns the next key of the mapping being read, or ok=false after its
// end (or once bad).
func (d *decoder) key() (key []byte, ok bool) {
	switch d.kind() {
	case tokKey:
		d.pos++
		return d.toks[d.pos-1].val, true
	case tokEnd:
		if !d.bad {
			d.pos++
		}
		return nil, false
	}
	d.fail()
	return nil, false
}

// enter moves into the mapping or sequence (k) at the current token and
// returns its number of entries; ok=false for null (nothing to decode), and
// bad for anything else.
func (d *decoder) enter(k tokKind) (n int, ok bool) {
	switch d.kind() {
	case k:
		d.pos++
		return int(d.toks[d.pos-1].n), true
	case tokNull:
		d.pos++
		return 0, false
	}
	d.fail()
	return 0, false
}

// leave moves past the end of a sequence whose elements were all read.
func (d *decoder) leave() {
	if d.kind() != tokEnd {
		d.fail()
		return
	}
	d.pos++
}

// seq decodes a sequence into a new slice, as encoding/json does: nil for
// null, an empty slice for an empty sequence.
func seq[T any](d *decoder, elem func(*decoder, *T)) []T {
	n, ok := d.enter(tokSeq)
	if !ok {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		if d.bad {
			return nil
		}
		elem(d, &out[i])
	}
	d.leave()
	return out
}

// scalar returns the current token if it is a string (or, with number, a
// number), and moves past it. ok=false for null, which leaves the field as
// it is; bad for other kinds.
func (d *decoder) scalar(number bool) (t token, ok bool) {
	switch k := d.kind(); {
	case k == tokString || (number && k == tokNumber):
		d.pos++
		return d.toks[d.pos-1], true
	case k == tokNull:
		d.pos++
		return token{}, false
	}
	d.fail()
	return token{}, false
}

// str reads a string, copied.
func (d *decoder) str() string {
	t, ok := d.scalar(false)
	if !ok {
		return ""
	}
	return d.strs.str(t.val)
}

// istr reads a string that is likely to repeat across objects (a label, a
// namespace, a node name, an image), shared with its other occurrences.
func (d *decoder) istr() string {
	t, ok := d.scalar(false)
	if !ok {
		return ""
	}
	return d.intern(t.val)
}

func (d *decoder) intern(b []byte) string {
	if len(b) > maxInternedLen {
		return d.strs.str(b) // a long value (an annotation) rarely repeats
	}
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	s := d.strs.str(b)
	if len(d.interned) < maxInterned {
		d.interned[s] = s
	}
	return s
}

// strList reads a sequence of strings.
func (d *decoder) strList() []string {
	return seq(d, func(d *decoder, s *string) { *s = d.istr() })
}

// strp reads an optional string of type T.
func strp[T ~string](d *decoder) *T {
	t, ok := d.scalar(false)
	if !ok {
		return nil
	}
	v := T(d.intern(t.val))
	return &v
}

// integer parses the current token as a decimal integer of bits bits, as
// encoding/json does for integer fields; ok=false for null.
func (d *decoder) integer(bits int) (v int64, ok bool) {
	switch d.kind() {
	case tokNumber:
	case tokNull:
		d.pos++
		return 0, false
	default:
		d.fail()
		return 0, false
	}
	b := d.toks[d.pos].val
	d.pos++
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		d.fail() // fractions, exponents and large values: the reference
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			d.fail()
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if lim := int64(1) << (bits - 1); bits < 64 && (v < -lim || v >= lim) {
		d.fail()
		return 0, false
	}
	return v, true
}

func (d *decoder) int32() int32 { v, _ := d.integer(32); return int32(v) }
func (d *decoder) int64() int64 { v, _ := d.integer(64); return v }

func (d *decoder) int32p() *int32 {
	v, ok := d.integer(32)
	if !ok {
		return nil
	}
	w := int32(v)
	return &w
}

func (d *decoder) int64p() *int64 {
	v, ok := d.integer(64)
	if !ok {
		return nil
	}
	return &v
}

// boolean reads a bool; ok=false for null.
func (d *decoder) boolean() (v, ok bool) {
	switch d.kind() {
	case tokTrue, tokFalse:
		d.pos++
		return d.toks[d.pos-1].kind == tokTrue, true
	case tokNull:
		d.pos++
		return false, false
	}
	d.fail()
	return false, false
}

func (d *decoder) bool() bool { v, _ := d.boolean(); return v }

func (d *decoder) boolp() *bool {
	v, ok := d.boolean()
	if !ok {
		return nil
	}
	return &v
}

// strMap reads a map of strings; skip names a key left out (compact.go),
// or is empty.
func (d *decoder) strMap(skip string) map[string]string {
	n, ok := d.enter(tokMap)
	if !ok {
		return nil
	}
	m := make(map[string]string, n)
	for k, ok := d.key(); ok; k, ok = d.key() {
		if d.kind() != tokString {
			d.fail() // null values, numbers: the reference
			return nil
		}
		if skip != "" && string(k) == skip {
			d.pos++
			continue
		}
		m[d.intern(k)] = d.intern(d.toks[d.pos].val)
		d.pos++
	}
	return m
}

// quantity reads a resource quantity as its UnmarshalJSON does.
func (d *decoder) quantity() resource.Quantity {
	var q resource.Quantity
	switch d.kind() {
	case tokString, tokNumber:
	default:
		d.fail() // null: the reference
		return q
	}
	t := d.toks[d.pos]
	d.pos++
	if t.esc {
		// UnmarshalJSON reads the bytes between the quotes as they are,
		// escapes and all: the reference reads the text.
		d.fail()
		return q
	}
	if c, ok := d.quantities[string(t.val)]; ok {
		return c.DeepCopy()
	}
	if err := q.UnmarshalJSON(d.scalarJSON(t)); err != nil {
		d.fail()
		return q
	}
	if len(d.quantities) < maxCached {
		d.quantities[string(t.val)] = q.DeepCopy()
	}
	return q
}

// time reads a metav1.Time as its UnmarshalJSON does.
func (d *decoder) time() metav1.Time {
	t, ok := d.scalar(false)
	if !ok {
		return metav1.Time{}
	}
	if c, ok := d.times[string(t.val)]; ok {
		return c
	}
	var v metav1.Time
	if err := v.UnmarshalJSON(d.scalarJSON(t)); err != nil {
		d.fail()
		return v
	}
	if len(d.times) < maxCached {
		d.times[string(t.val)] = v
	}
	return v
}

func (d *decoder) timep() *metav1.Time {
	if d.kind() == tokNull {
		d.pos++
		return nil
	}
	v := d.time()
	return &v
}

// intOrString reads an optional IntOrString as its UnmarshalJSON does.
func (d *decoder) intOrString() *intstr.IntOrString {
	switch d.kind() {
	case tokNull:
		d.pos++
		return nil
	case tokString, tokNumber:
	default:
		d.fail()
		return nil
	}
	t := d.toks[d.pos]
	d.pos++
	v := &intstr.IntOrString{}
	if err := v.UnmarshalJSON(d.scalarJSON(t)); err != nil {
		d.fail()
		return nil
	}
	v.StrVal = d.intern([]byte(v.StrVal))
	return v
}

// scalarJSON returns the JSON of t, a string or a number, for an
// UnmarshalJSON: a number as it is, a string quoted (into jbuf, which the
// next call reuses).
func (d *decoder) scalarJSON(t token) []byte {
	if t.kind != tokString {
		return t.val
	}
	d.jbuf = appendJSONString(d.jbuf[:0], t.val)
	return d.jbuf
}

// delegate decodes the current value into v (a pointer) with json-iterator,
// from its JSON.
func (d *decoder) delegate(v any) {
	if d.bad {
		return
	}
	end := skipValue(d.toks, d.pos)
	for _, t := range d.toks[d.pos:end] {
		if t.esc {
			// The JSON written back may spell a string otherwise than the
			// input did, which matters to quantities: the reference.
			d.fail()
			return
		}
	}
	d.jbuf, _ = appendJSON(d.jbuf[:0], d.toks, d.pos)
	d.pos = end
	if itemJSON.Unmarshal(d.jbuf, v) != nil {
		d.fail()
	}
}

// other handles a key of a *T that the decoder does not read by hand: a
// field of T is decoded through json-iterator; a key that matches a field
// only when case is ignored (encoding/json's rule), or a key not in ASCII
// (whose folding is subtler), makes the decoder give up; any other key is
// not a field and is skipped, as encoding/json skips it.
func other[T any](d *decoder, p *T, key []byte) {
	if d.bad {
		return
	}
	fs := fieldsOf(reflect.TypeFor[T]())
	if f, ok := fs.exact[string(key)]; ok {
		d.delegate(reflect.NewAt(f.typ, unsafe.Add(unsafe.Pointer(p), f.offset)).Interface())
		return
	}
	for _, c := range key {
		if c >= 0x80 {
			d.fail()
			return
		}
	}
	if fs.folded[strings.ToLower(string(key))] {
		d.fail()
		return
	}
	d.skip()
}

type fieldRef struct {
	offset uintptr
	typ    reflect.Type
}

type fieldSet struct {
	exact  map[string]fieldRef
	folded map[string]bool
}

var fieldSets sync.Map // reflect.Type -> *fieldSet

// fieldsOf lists the JSON fields of struct type t, with the fields of
// embedded structs without a name of their own, as encoding/json does.
func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{exact: map[string]fieldRef{}, folded: map[string]bool{}}
	var walk func(t reflect.Type, base uintptr)
	walk = func(t reflect.Type, base uintptr) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, base+f.Offset)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fs.exact[name] = fieldRef{offset: base + f.Offset, typ: f.Type}
			fs.folded[strings.ToLower(name)] = true
		}
	}
	walk(t, 0)
	got, _ := fieldSets.LoadOrStore(t, fs)
	return got.(*fieldSet)
}

// strArena copies strings into shared blocks: one allocation per block
// instead of one per string, in memory the collector does not scan. A block
// lives as long as any string in it, which suits a snapshot: its objects
// live and die together.
type strArena struct{ buf []byte }

const arenaBlock = 32 << 10

func (a *strArena) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > arenaBlock/8 {
		return string(b)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, arenaBlock)
	}
	i := len(a.buf)
	a.buf = append(a.buf, b...)
	return unsafe.String(&a.buf[i], len(b))
}
