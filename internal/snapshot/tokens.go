package snapshot

import "strconv"

// Tokens are one object's tree as the fast YAML path (fastyaml.go) and the
// JSON tokenizer (jsontokens.go) read it, flat: a mapping is its token, its
// keys and values in order, and an end token; a sequence the same without
// keys. The typed decoder (decode.go) reads them straight into the API types,
// and appendJSON writes them as JSON for everything else, so that both
// formats go through one decoder without a JSON text in between.

type tokKind uint8

const (
	tokMap    tokKind = iota + 1 // a mapping: key, value, key, value, ..., tokEnd
	tokSeq                       // a sequence: values, then tokEnd
	tokEnd                       // the end of a mapping or sequence
	tokKey                       // a mapping's key; val is the string
	tokString                    // val is the string
	tokNumber                    // val is a JSON number's text
	tokTrue
	tokFalse
	tokNull
)

// token is one token. val may point into the input or into a tokenizer's
// scratch buffer: valid until that tokenizer reads its next object.
type token struct {
	val  []byte
	kind tokKind
	// esc is set by the JSON tokenizer on a string whose input had escapes.
	esc bool
	// For tokMap and tokSeq: n is the number of entries or elements, and
	// next the position of the token after the matching tokEnd.
	n    int32
	next int32
}

// tokens is a token list under construction.
type tokens []token

// open appends a mapping or sequence token and returns its position, for close.
func (t *tokens) open(k tokKind) int {
	*t = append(*t, token{kind: k})
	return len(*t) - 1
}

// close ends the mapping or sequence opened at start, with n entries.
func (t *tokens) close(start, n int) {
	*t = append(*t, token{kind: tokEnd})
	(*t)[start].n = int32(n)
	(*t)[start].next = int32(len(*t))
}

func (t *tokens) add(k tokKind, val []byte) { *t = append(*t, token{kind: k, val: val}) }

// appendJSON appends the value at toks[i] as JSON and returns the position
// after it.
func appendJSON(out []byte, toks []token, i int) ([]byte, int) {
	t := toks[i]
	switch t.kind {
	case tokMap, tokSeq:
		open, end := byte('{'), byte('}')
		if t.kind == tokSeq {
			open, end = '[', ']'
		}
		out = append(out, open)
		j := i + 1
		for first := true; toks[j].kind != tokEnd; first = false {
			if !first {
				out = append(out, ',')
			}
			if t.kind == tokMap {
				out = appendJSONString(out, toks[j].val)
				out = append(out, ':')
				j++
			}
			out, j = appendJSON(out, toks, j)
		}
		return append(out, end), j + 1
	case tokString, tokKey:
		return appendJSONString(out, t.val), i + 1
	case tokNumber:
		return append(out, t.val...), i + 1
	case tokTrue:
		return append(out, "true"...), i + 1
	case tokFalse:
		return append(out, "false"...), i + 1
	case tokNull:
		return append(out, "null"...), i + 1
	}
	panic("snapshot: token of unknown kind " + strconv.Itoa(int(t.kind)))
}

// skipValue returns the position after the value at toks[i].
func skipValue(toks []token, i int) int {
	if k := toks[i].kind; k == tokMap || k == tokSeq {
		return int(toks[i].next)
	}
	return i + 1
}
