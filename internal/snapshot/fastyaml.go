package snapshot

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastYAMLToJSON converts the block-style YAML that kubectl and the YAML
// libraries write (block mappings and sequences, plain, quoted and literal
// scalars, empty flow collections) to the JSON that sigs.k8s.io/yaml's
// YAMLToJSON makes of it, an order of magnitude faster. Anything outside that
// subset (anchors, tags, flow collections with content, folded or multi-line
// plain scalars, duplicate keys, plain scalars that YAML would read as floats,
// timestamps or non-decimal integers, ...) makes it answer ok=false, and the
// caller parses with the full parser, which also reports errors: the fast path
// never decides what a document means on its own. FuzzFastYAML holds it to
// the full parser's answers.
func fastYAMLToJSON(in []byte) (out []byte, ok bool) {
	var p fastParser
	toks, ok := p.parse(in)
	if !ok {
		return nil, false
	}
	out, _ = appendJSON(make([]byte, 0, len(in)), toks, 0)
	return out, true
}

// parse reads in, in the subset fastYAMLToJSON reads, into tokens; ok=false
// outside it. The tokens, and the parser's buffers, are valid until the next
// call.
func (p *fastParser) parse(in []byte) (toks []token, ok bool) {
	if !yamlPrintable(in) {
		return nil, false
	}
	if len(in) > 0 && in[len(in)-1] != '\n' && bytes.IndexByte(in, '|') >= 0 {
		return nil, false // a literal block at the very end keeps no final line break
	}
	p.lines, p.toks, p.keys, p.scratch, p.pos = p.lines[:0], p.toks[:0], p.keys[:0], p.scratch[:0], 0
	for rest := in; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		var line []byte
		if i < 0 {
			line, rest = rest, nil
		} else {
			line, rest = rest[:i], rest[i+1:]
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		if indent == 0 && (bytes.HasPrefix(line, []byte("---")) || bytes.HasPrefix(line, []byte("..."))) {
			return nil, false // document markers: the parser
		}
		p.lines = append(p.lines, fastLine{indent: indent, text: line[indent:]})
	}
	p.skip()
	if p.pos == len(p.lines) {
		return nil, false // empty: the full parser says what that is
	}
	indent := p.lines[p.pos].indent
	if !p.node(indent) {
		return nil, false
	}
	if p.skip(); p.pos != len(p.lines) {
		return nil, false
	}
	return p.toks, true
}

// yamlPrintable reports valid UTF-8 holding only the characters YAML allows
// (tab, line feed and printable ones; no byte order mark): the parser
// refuses the others, so the fast path does too. Carriage returns (line
// breaks of their own to YAML) are left to the parser as well.
func yamlPrintable(in []byte) bool {
	for i := 0; i < len(in); {
		c := in[i]
		if printableASCII[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			return false
		}
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError || r >= 0x80 && r <= 0x9F || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	return true
}

// printableASCII holds the ASCII characters YAML allows.
var printableASCII = func() (set [256]bool) {
	for c := 0x20; c < 0x7F; c++ {
		set[c] = true
	}
	set['\t'], set['\n'] = true, true
	return set
}()

type fastLine struct {
	indent int
	text   []byte
}

// fastParser reads the subset; one parser may read many documents, one at a
// time, reusing its buffers.
type fastParser struct {
	lines   []fastLine
	pos     int
	toks    tokens
	keys    [][]byte // the keys of the mappings being read, to refuse duplicates
	scratch []byte   // strings that are not slices of the input
}

// skip moves past blank and comment lines.
func (p *fastParser) skip() {
	for p.pos < len(p.lines) {
		t := bytes.TrimRight(p.lines[p.pos].text, " ")
		if len(t) > 0 && t[0] != '#' {
			return // a tab in the indentation is content: node() refuses it
		}
		p.pos++
	}
}

func isDash(t []byte) bool { return len(t) > 0 && t[0] == '-' && (len(t) == 1 || t[1] == ' ') }

// node converts the block node whose first line is the current one, at
// indent.
func (p *fastParser) node(indent int) bool {
	l := p.lines[p.pos]
	if l.indent != indent || len(l.text) == 0 || l.text[0] == '\t' {
		return false
	}
	if isDash(l.text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func (p *fastParser) mapping(indent int) bool {
	start := p.toks.open(tokMap)
	firstKey := len(p.keys)
	defer func() { p.keys = p.keys[:firstKey] }()
	for {
		p.skip()
		if p.pos == len(p.lines) || p.lines[p.pos].indent < indent {
			break
		}
		l := p.lines[p.pos]
		if l.indent > indent || isDash(l.text) {
			return false
		}
		key, value, ok := splitKey(l.text)
		if !ok {
			return false
		}
		for _, k := range p.keys[firstKey:] {
			if len(k) == len(key) && k[0] == key[0] && bytes.Equal(k, key) {
				return false // the full parser refuses duplicates
			}
		}
		p.keys = append(p.keys, key)
		p.toks.add(tokKey, key)
		p.pos++
		if !p.value(indent, value, true) {
			return false
		}
	}
	p.toks.close(start, len(p.keys)-firstKey)
	return true
}

func (p *fastParser) sequence(indent int) bool {
	start := p.toks.open(tokSeq)
	n := 0
	for {
		p.skip()
		if p.pos == len(p.lines) || p.lines[p.pos].indent < indent {
			break
		}
		l := p.lines[p.pos]
		if l.indent > indent || !isDash(l.text) {
			if l.indent == indent && !isDash(l.text) {
				break // the parent mapping's next key, at the dashes' indentation
			}
			return false
		}
		n++
		rest := l.text[1:]
		spaces := 0
		for spaces < len(rest) && rest[spaces] == ' ' {
			spaces++
		}
		content := rest[spaces:]
		if len(content) == 0 || content[0] == '#' {
			p.pos++
			if !p.value(indent, nil, false) {
				return false
			}
			continue
		}
		if _, _, isKey := splitKey(content); isKey || isDash(content) {
			// "- key: value" or "- - x": the rest of the line is the first
			// line of a node indented where its content starts.
			p.lines[p.pos] = fastLine{indent: indent + 1 + spaces, text: content}
			if !p.node(indent + 1 + spaces) {
				return false
			}
			continue
		}
		p.pos++
		if !p.value(indent, content, false) {
			return false
		}
	}
	p.toks.close(start, n)
	return true
}

// value converts the value of a key (or of a dash) at indent whose text on
// the key's line is text: a scalar there, or a block node on the next lines
// when text is empty. In a mapping (inMapping), a sequence may sit at the
// key's own indentation.
func (p *fastParser) value(indent int, text []byte, inMapping bool) bool {
	text = trimComment(text)
	if len(text) == 0 {
		p.skip()
		if p.pos < len(p.lines) {
			l := p.lines[p.pos]
			if l.indent > indent || (inMapping && l.indent == indent && isDash(l.text)) {
				return p.node(l.indent)
			}
		}
		p.toks.add(tokNull, nil)
		return true
	}
	// A scalar on the key's line: nothing may continue it on the next lines
	// (a multi-line plain or quoted scalar), except a literal block's body.
	if text[0] == '|' {
		return p.literal(indent, text)
	}
	if !p.scalar(text) {
		return false
	}
	return p.pos == len(p.lines) || !p.continues(indent)
}

// continues reports whether the next non-blank line is more indented than
// indent, which after a scalar would make it a multi-line scalar.
func (p *fastParser) continues(indent int) bool {
	for i := p.pos; i < len(p.lines); i++ {
		t := bytes.TrimRight(p.lines[i].text, " ")
		if len(t) == 0 {
			continue
		}
		return p.lines[i].indent > indent || t[0] == '\t'
	}
	return false
}

// literal converts a literal block scalar ("|", "|-", "|+") whose body is the
// following lines indented more than indent.
func (p *fastParser) literal(indent int, header []byte) bool {
	chomp := byte(0)
	switch string(header) {
	case "|":
	case "|-":
		chomp = '-'
	case "|+":
		chomp = '+'
	default:
		return false // indentation indicators, comments: the full parser
	}
	start := len(p.scratch)
	blockIndent := -1
	trailing := 0 // line breaks after the last content line
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if len(bytes.TrimRight(l.text, " ")) == 0 {
			if blockIndent >= 0 && l.indent > blockIndent {
				return false // spaces beyond the indentation on an empty line
			}
			trailing++
			p.pos++
			continue
		}
		if l.text[0] == '\t' && l.indent > indent {
			return false // a tab where YAML may want indentation
		}
		if blockIndent < 0 {
			if l.indent <= indent {
				break
			}
			blockIndent = l.indent
			if trailing > 0 {
				return false // leading empty lines
			}
		}
		if l.indent < blockIndent {
			if l.indent > indent {
				return false // a less indented body line
			}
			break
		}
		for ; trailing > 0; trailing-- {
			p.scratch = append(p.scratch, '\n')
		}
		if len(p.scratch) > start {
			p.scratch = append(p.scratch, '\n')
		}
		for range l.indent - blockIndent {
			p.scratch = append(p.scratch, ' ')
		}
		p.scratch = append(p.scratch, l.text...)
		p.pos++
	}
	if blockIndent < 0 {
		return false // an empty block: the full parser
	}
	switch chomp {
	case 0:
		p.scratch = append(p.scratch, '\n')
	case '+':
		p.scratch = append(p.scratch, '\n')
		for ; trailing > 0; trailing-- {
			p.scratch = append(p.scratch, '\n')
		}
	}
	p.toks.add(tokString, p.scratch[start:])
	return true
}

// scalar converts a scalar written on one line.
func (p *fastParser) scalar(t []byte) bool {
	switch t[0] {
	case '"':
		s, ok := unquoteDouble(t)
		if !ok {
			return false
		}
		p.toks.add(tokString, s)
		return true
	case '\'':
		s, ok := unquoteSingle(t)
		if !ok {
			return false
		}
		p.toks.add(tokString, s)
		return true
	case '{', '[':
		if string(t) == "{}" || string(t) == "[]" {
			k := tokMap
			if t[0] == '[' {
				k = tokSeq
			}
			p.toks.close(p.toks.open(k), 0)
			return true
		}
		return false
	}
	if !plainSafe(t) {
		return false
	}
	switch string(t) {
	case "~", "null", "Null", "NULL":
		p.toks.add(tokNull, nil)
		return true
	case "true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
		p.toks.add(tokTrue, nil)
		return true
	case "false", "False", "FALSE", "n", "N", "no", "No", "NO", "off", "Off", "OFF":
		p.toks.add(tokFalse, nil)
		return true
	}
	if c := t[0]; c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' {
		if decimalInt(t) {
			p.toks.add(tokNumber, t)
			return true
		}
		if numberish(t) {
			return false // floats, octal, hex, timestamps: the full parser
		}
	}
	p.toks.add(tokString, t)
	return true
}

// maxKey bounds a key's length: YAML allows 1024 characters before a key's
// colon (with the indentation; the fast path leaves some room).
const maxKey = 900

// splitKey splits "key: value" (or "key:") at the separator; the key plain or
// quoted, and a string to YAML.
func splitKey(t []byte) (key, value []byte, ok bool) {
	if len(t) == 0 {
		return nil, nil, false
	}
	var end int
	switch t[0] {
	case '"', '\'':
		q := t[0]
		end = 1
		for end < len(t) {
			if t[end] == '\\' && q == '"' {
				end += 2
				continue
			}
			if t[end] == q {
				if q == '\'' && end+1 < len(t) && t[end+1] == '\'' {
					end += 2
					continue
				}
				break
			}
			end++
		}
		if end >= len(t) || end > maxKey {
			return nil, nil, false
		}
		raw := t[:end+1]
		rest := t[end+1:]
		if len(rest) == 0 || rest[0] != ':' || (len(rest) > 1 && rest[1] != ' ') {
			return nil, nil, false
		}
		var s []byte
		if q == '"' {
			s, ok = unquoteDouble(raw)
		} else {
			s, ok = unquoteSingle(raw)
		}
		if !ok {
			return nil, nil, false
		}
		return s, bytes.TrimLeft(rest[1:], " "), true
	}
	i := indexPair(t, ':', ' ')
	if i < 0 {
		if t[len(t)-1] != ':' {
			return nil, nil, false
		}
		i = len(t) - 1
	}
	if i > maxKey {
		return nil, nil, false
	}
	key = bytes.TrimRight(t[:i], " ")
	if len(key) == 0 || !plainSafe(key) || indexPair(key, ' ', '#') >= 0 {
		return nil, nil, false
	}
	// A key YAML would read as something else than a string.
	switch string(key) {
	case "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE",
		"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "<<":
		return nil, nil, false
	}
	if c := key[0]; c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' {
		if decimalInt(key) || numberish(key) {
			return nil, nil, false
		}
	}
	if i == len(t)-1 {
		return key, nil, true
	}
	return key, bytes.TrimLeft(t[i+2:], " "), true
}

// indexPair is bytes.Index(t, []byte{a, b}), faster on short lines where a
// is rare (a colon, a hash).
func indexPair(t []byte, a, b byte) int {
	for off := 0; ; {
		i := bytes.IndexByte(t[off:], a)
		if i < 0 {
			return -1
		}
		off += i + 1
		if off < len(t) && t[off] == b {
			return off - 1
		}
	}
}

// trimComment removes a trailing comment and spaces from a value.
func trimComment(t []byte) []byte {
	t = bytes.TrimRight(t, " ")
	if len(t) == 0 || t[0] == '#' {
		return nil
	}
	if t[0] == '"' || t[0] == '\'' {
		return t // a quoted scalar: scalar() refuses anything after its end
	}
	if i := indexPair(t, ' ', '#'); i >= 0 {
		t = bytes.TrimRight(t[:i], " ")
	}
	return t
}

// plainSafe reports whether t is a plain scalar the fast path can read: no
// indicator YAML would read otherwise at its start, no ": " or tab inside, no
// trailing colon.
func plainSafe(t []byte) bool {
	switch t[0] {
	case '&', '*', '!', '|', '>', '%', '@', '`', '#', '?', ':', ',', '[', ']', '{', '}', '\'', '"':
		return false
	case '-':
		if len(t) == 1 || t[1] == ' ' {
			return false
		}
	}
	if indexPair(t, ':', ' ') >= 0 || bytes.IndexByte(t, '\t') >= 0 || t[len(t)-1] == ':' {
		return false
	}
	return true
}

// decimalInt reports a decimal integer that YAML and JSON read alike.
func decimalInt(t []byte) bool {
	s := t
	if s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 || (s[0] == '0' && len(s) > 1) || (t[0] == '-' && string(s) == "0") {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numberish reports whether the YAML parser would read plain scalar t, which
// starts with a digit, a sign or a dot, as anything but a string (a float, an
// integer in another base or with underscores, a timestamp), as
// go.yaml.in/yaml/v2's resolve does: the fast path leaves those to it.
func numberish(t []byte) bool {
	s := string(t)
	switch s {
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
		return true
	}
	if len(s) >= 5 && s[4] == '-' && isDigits(s[:4]) {
		return true // maybe a timestamp
	}
	signs := 0
	for _, c := range t {
		if !numberChar[c] {
			// A character no number has (such as the unit of 100m or
			// 128Mi): none of the parsings below would succeed.
			return false
		}
		if c == '-' || c == '+' {
			signs++
		}
	}
	if signs > 2 {
		return false // a sign before the number and its exponent at most: not a UID
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseFloat(plain, 64); err == nil {
		return true
	}
	if rest, ok := strings.CutPrefix(plain, "0b"); ok {
		// The resolver parses the rest as a signed number first: 0b+1
		// and 0b-1 are integers to it.
		if _, err := strconv.ParseInt(rest, 2, 64); err == nil {
			return true
		}
		if _, err := strconv.ParseUint(rest, 2, 64); err == nil {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
		if _, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
			return true
		}
	}
	return false
}

// numberChar holds the characters of the numbers strconv parses (digits, hex
// digits, signs, points, underscores, base prefixes, exponents, and the
// letters of inf, infinity and nan, in either case).
var numberChar = func() (set [256]bool) {
	for _, c := range []byte("0123456789abcdefABCDEF+-._xXoObBpPiInNtTyY") {
		set[c] = true
	}
	return set
}()

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// unquoteDouble reads a double-quoted scalar that ends the text, with the
// escapes JSON also has but \/, which YAML lacks (and \x, \U, \0, \a, \v,
// \e): anything else, the full parser.
func unquoteDouble(t []byte) ([]byte, bool) {
	if len(t) < 2 || t[len(t)-1] != '"' {
		return nil, false
	}
	body := t[1 : len(t)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if bytes.IndexByte(body, '"') >= 0 {
			return nil, false
		}
		return body, true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '"' {
			return nil, false
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i == len(body) {
			return nil, false
		}
		hex := 0
		switch body[i] {
		case '\\', '"':
			out = append(out, body[i])
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case '0':
			out = append(out, 0)
		case 'a':
			out = append(out, 7)
		case 'v':
			out = append(out, 11)
		case 'e':
			out = append(out, 27)
		case 'x':
			hex = 2
		case 'u':
			hex = 4
		case 'U':
			hex = 8
		default:
			return nil, false
		}
		if hex > 0 {
			if i+hex >= len(body) {
				return nil, false
			}
			v, err := strconv.ParseUint(string(body[i+1:i+1+hex]), 16, 32)
			if err != nil || (v >= 0xD800 && v <= 0xDFFF) || v > utf8.MaxRune {
				return nil, false
			}
			out = utf8.AppendRune(out, rune(v))
			i += hex
		}
	}
	return out, true
}

// unquoteSingle reads a single-quoted scalar that ends the text.
func unquoteSingle(t []byte) ([]byte, bool) {
	if len(t) < 2 || t[len(t)-1] != '\'' {
		return nil, false
	}
	body := t[1 : len(t)-1]
	if bytes.IndexByte(body, '\'') < 0 {
		return body, true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		if body[i] == '\'' {
			if i+1 < len(body) && body[i+1] == '\'' {
				out = append(out, '\'')
				i++
				continue
			}
			return nil, false
		}
		out = append(out, body[i])
	}
	return out, true
}

// appendJSONString appends s as a JSON string.
func appendJSONString(out, s []byte) []byte {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\t':
			out = append(out, '\\', 't')
		case '\r':
			out = append(out, '\\', 'r')
		default:
			out = append(out, `\u00`...)
			out = append(out, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xF])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}
