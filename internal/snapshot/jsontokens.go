package snapshot

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonTokenizer reads one JSON value into tokens (tokens.go) for the
// decoder. Like the fast YAML path it reads a subset and leaves the rest to
// the reference decoder: strings that are not valid UTF-8 (which
// encoding/json would repair), a mapping with the same key twice (which
// encoding/json would merge), anything that is not JSON. One tokenizer may
// read many values, one at a time, reusing its buffers.
type jsonTokenizer struct {
	in      []byte
	i       int
	toks    tokens
	scratch []byte
}

// maxDepth bounds the nesting the tokenizer follows (encoding/json allows
// 10,000 levels; objects have a dozen).
const maxDepth = 100

// parse reads in, a single JSON value with white space around it.
func (z *jsonTokenizer) parse(in []byte) (toks []token, ok bool) {
	z.in, z.i, z.toks, z.scratch = in, 0, z.toks[:0], z.scratch[:0]
	if !z.value(0) {
		return nil, false
	}
	z.space()
	if z.i != len(z.in) {
		return nil, false
	}
	return z.toks, true
}

func (z *jsonTokenizer) space() {
	for z.i < len(z.in) {
		switch z.in[z.i] {
		case ' ', '\t', '\n', '\r':
			z.i++
		default:
			return
		}
	}
}

func (z *jsonTokenizer) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	z.space()
	if z.i == len(z.in) {
		return false
	}
	switch c := z.in[z.i]; c {
	case '{':
		return z.object(depth)
	case '[':
		return z.array(depth)
	case '"':
		s, esc, ok := z.string()
		if !ok {
			return false
		}
		z.toks = append(z.toks, token{kind: tokString, val: s, esc: esc})
		return true
	case 't':
		return z.literal("true", tokTrue)
	case 'f':
		return z.literal("false", tokFalse)
	case 'n':
		return z.literal("null", tokNull)
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return z.number()
		}
		return false
	}
}

// open reads the opening bracket of an array or object (k), up to its
// first entry; empty when the closing bracket follows, which closes it.
func (z *jsonTokenizer) open(k tokKind, end byte) (start int, empty bool) {
	z.i++
	start = z.toks.open(k)
	if z.space(); z.i < len(z.in) && z.in[z.i] == end {
		z.i++
		z.toks.close(start, 0)
		return start, true
	}
	return start, false
}

// next reads what follows the nth entry of the array or object at start:
// a comma (more), or its closing bracket end, which closes it (ok).
func (z *jsonTokenizer) next(start, n int, end byte) (more, ok bool) {
	z.space()
	if z.i == len(z.in) {
		return false, false
	}
	c := z.in[z.i]
	z.i++
	if c == end {
		z.toks.close(start, n)
		return false, true
	}
	if c != ',' {
		return false, false
	}
	return true, true
}

func (z *jsonTokenizer) array(depth int) bool {
	start, empty := z.open(tokSeq, ']')
	for n := 1; !empty; n++ {
		if !z.value(depth + 1) {
			return false
		}
		if more, ok := z.next(start, n, ']'); !more {
			return ok
		}
	}
	return true
}

func (z *jsonTokenizer) object(depth int) bool {
	start, empty := z.open(tokMap, '}')
	firstKey := len(z.toks)
	for n := 0; !empty; {
		z.space()
		if z.i == len(z.in) || z.in[z.i] != '"' {
			return false
		}
		key, esc, ok := z.string()
		if !ok {
			return false
		}
		if !z.newKey(key, firstKey, n) {
			return false // the same key twice: the reference
		}
		z.toks = append(z.toks, token{kind: tokKey, val: key, esc: esc})
		z.space()
		if z.i == len(z.in) || z.in[z.i] != ':' {
			return false
		}
		z.i++
		if !z.value(depth + 1) {
			return false
		}
		n++
		if more, ok := z.next(start, n, '}'); !more {
			return ok
		}
	}
	return true
}

// maxKeys bounds the keys of a mapping the tokenizer reads (checking each
// against those before it); larger ones are left to the reference.
const maxKeys = 256

// newKey reports whether key is not among the n keys before it in the
// mapping whose first key is at toks[first].
func (z *jsonTokenizer) newKey(key []byte, first, n int) bool {
	if n >= maxKeys {
		return false
	}
	for i := first; n > 0; n-- {
		if bytes.Equal(z.toks[i].val, key) {
			return false
		}
		i = skipValue(z.toks, i+1)
	}
	return true
}

func (z *jsonTokenizer) literal(word string, k tokKind) bool {
	if !bytes.HasPrefix(z.in[z.i:], []byte(word)) {
		return false
	}
	z.i += len(word)
	z.toks.add(k, nil)
	return true
}

// number reads a number as JSON writes it.
func (z *jsonTokenizer) number() bool {
	start := z.i
	if z.in[z.i] == '-' {
		z.i++
	}
	digits := func() int {
		n := 0
		for z.i < len(z.in) && z.in[z.i] >= '0' && z.in[z.i] <= '9' {
			z.i++
			n++
		}
		return n
	}
	intStart := z.i
	if n := digits(); n == 0 || (n > 1 && z.in[intStart] == '0') {
		return false
	}
	if z.i < len(z.in) && z.in[z.i] == '.' {
		z.i++
		if digits() == 0 {
			return false
		}
	}
	if z.i < len(z.in) && (z.in[z.i] == 'e' || z.in[z.i] == 'E') {
		z.i++
		if z.i < len(z.in) && (z.in[z.i] == '+' || z.in[z.i] == '-') {
			z.i++
		}
		if digits() == 0 {
			return false
		}
	}
	z.toks.add(tokNumber, z.in[start:z.i])
	return true
}

// string reads a string at the opening quote: a slice of the input when it
// has no escapes, else unescaped into the scratch buffer (esc).
func (z *jsonTokenizer) string() (s []byte, esc, ok bool) {
	z.i++
	start := z.i
	for z.i < len(z.in) {
		c := z.in[z.i]
		switch {
		case c == '"':
			s = z.in[start:z.i]
			z.i++
			return s, false, utf8.Valid(s)
		case c == '\\':
			return z.escaped(start)
		case c < 0x20:
			return nil, false, false
		}
		z.i++
	}
	return nil, false, false
}

// escaped reads the rest of a string with escapes, from start.
func (z *jsonTokenizer) escaped(start int) (s []byte, esc, ok bool) {
	out := len(z.scratch)
	z.scratch = append(z.scratch, z.in[start:z.i]...)
	for z.i < len(z.in) {
		c := z.in[z.i]
		switch {
		case c == '"':
			z.i++
			s = z.scratch[out:]
			return s, true, utf8.Valid(s)
		case c < 0x20:
			return nil, false, false
		case c != '\\':
			z.scratch = append(z.scratch, c)
			z.i++
			continue
		}
		if z.i+1 >= len(z.in) {
			return nil, false, false
		}
		e := z.in[z.i+1]
		z.i += 2
		switch e {
		case '"', '\\', '/':
			z.scratch = append(z.scratch, e)
		case 'b':
			z.scratch = append(z.scratch, '\b')
		case 'f':
			z.scratch = append(z.scratch, '\f')
		case 'n':
			z.scratch = append(z.scratch, '\n')
		case 'r':
			z.scratch = append(z.scratch, '\r')
		case 't':
			z.scratch = append(z.scratch, '\t')
		case 'u':
			r, ok := z.hex4()
			if !ok {
				return nil, false, false
			}
			if utf16.IsSurrogate(r) {
				// A pair, or (alone) what encoding/json would replace.
				if z.i+1 >= len(z.in) || z.in[z.i] != '\\' || z.in[z.i+1] != 'u' {
					return nil, false, false
				}
				z.i += 2
				r2, ok := z.hex4()
				if !ok {
					return nil, false, false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, false, false
				}
			}
			z.scratch = utf8.AppendRune(z.scratch, r)
		default:
			return nil, false, false
		}
	}
	return nil, false, false
}

func (z *jsonTokenizer) hex4() (rune, bool) {
	if z.i+4 > len(z.in) {
		return 0, false
	}
	var r rune
	for _, c := range z.in[z.i : z.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	z.i += 4
	return r, true
}
