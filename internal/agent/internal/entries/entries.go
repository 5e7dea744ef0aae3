// Package entries reads the events of a metadata service's document one at a
// time, so that one malformed event (maybe another VM's) never hides the
// others, the agent's own notice among them. The AWS and Azure sources both
// read their scheduled events through it.
package entries

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Problem is one malformed entry of a document.
type Problem struct {
	// Index is the entry's position in its array.
	Index int
	// EventID is the entry's identifier, when it could be read.
	EventID string
	// Skipped says that the entry was left out; otherwise it was kept without
	// the fields Err names.
	Skipped bool
	// Err says what is wrong.
	Err error
}

// Parse reads each entry of raw with parse, which returns the entry, whether it
// must be left out, and what is wrong with it (nil when nothing). It returns
// the entries kept, in order, and a Problem for each entry with an error; where
// prefixes the errors ("scheduled events").
func Parse[E any](raw []json.RawMessage, where string, id func(E) string, parse func(json.RawMessage) (E, bool, error)) ([]E, []Problem) {
	kept := make([]E, 0, len(raw))
	var problems []Problem
	for i, r := range raw {
		e, skipped, err := parse(r)
		if err != nil {
			problems = append(problems, Problem{Index: i, EventID: id(e), Skipped: skipped,
				Err: fmt.Errorf("%s[%d]: %w", where, i, err)})
		}
		if !skipped {
			kept = append(kept, e)
		}
	}
	return kept, problems
}

// Fields decodes the fields of one entry, one at a time, collecting what is
// wrong instead of stopping at the first problem.
type Fields struct {
	errs []error
}

// Object decodes the entry b, which must be a JSON object, into raw (a struct
// of json.RawMessage fields, so that each field is decoded on its own later).
func Object(b json.RawMessage, raw any) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("not an object: %s", Excerpt(b))
	}
	return json.Unmarshal(b, raw)
}

// Decode decodes the field name's value r into v; an absent field (r empty)
// leaves v alone. It reports whether r was absent or decoded; a value that does
// not decode is recorded as a problem.
func (f *Fields) Decode(name string, r json.RawMessage, v any) bool {
	if len(r) == 0 {
		return true
	}
	if err := json.Unmarshal(r, v); err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", name, err))
		return false
	}
	return true
}

// Add records a problem.
func (f *Fields) Add(err error) { f.errs = append(f.errs, err) }

// Failed reports whether a problem was recorded.
func (f *Fields) Failed() bool { return len(f.errs) > 0 }

// Err joins the problems recorded; nil when none.
func (f *Fields) Err() error { return errors.Join(f.errs...) }

// Excerpt returns the start of b, for an error message: a value from outside is
// never echoed whole.
func Excerpt(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
