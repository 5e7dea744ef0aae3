package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// validate checks v against a JSON Schema of the chart, for the tests. It
// knows the keywords values.schema.json uses and refuses any other, so that a
// keyword it would silently skip cannot make a test pass: Helm itself checks
// the chart with its own validator (helm lint). Problems are returned as
// "/path: message", sorted.
func validate(schema object, v any) ([]string, error) {
	defs, _ := schema.get("definitions")
	var problems []string
	var err error
	var walk func(s object, v any, path string)
	walk = func(s object, v any, path string) {
		if err != nil {
			return
		}
		if ref, ok := s.get("$ref"); ok {
			name := strings.TrimPrefix(ref.(string), "#/definitions/")
			d, ok := defs.(object).get(name)
			if !ok {
				err = fmt.Errorf("%s: $ref %s not found", path, ref)
				return
			}
			s = d.(object)
		}
		bad := func(format string, args ...any) {
			problems = append(problems, path+": "+fmt.Sprintf(format, args...))
		}
		for _, m := range s {
			switch m.Key {
			case "$schema", "title", "description", "definitions", "$ref":
			case "type":
				if !hasType(v, m.Value.(string)) {
					bad("is %s, want %s", jsonType(v), m.Value)
					return // the other keywords assume the type
				}
			case "enum":
				if !slices.ContainsFunc(m.Value.([]any), func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) && jsonType(e) == jsonType(v) }) {
					bad("%v is not one of %v", v, m.Value)
				}
			case "pattern":
				if s, ok := v.(string); ok && !regexp.MustCompile(m.Value.(string)).MatchString(s) {
					bad("%q does not match %s", s, m.Value)
				}
			case "minLength", "maxLength":
				n := number(m.Value)
				if s, ok := v.(string); ok {
					l := float64(len([]rune(s)))
					if m.Key == "minLength" && l < n || m.Key == "maxLength" && l > n {
						bad("length %v, %s %v", l, m.Key, n)
					}
				}
			case "minimum", "maximum":
				if isNumber(v) {
					x, limit := number(v), number(m.Value)
					if m.Key == "minimum" && x < limit || m.Key == "maximum" && x > limit {
						bad("%v is out of range (%s %v)", v, m.Key, limit)
					}
				}
			case "required":
				if mv, ok := v.(map[string]any); ok {
					for _, r := range m.Value.([]any) {
						if _, ok := mv[r.(string)]; !ok {
							bad("%s is required", r)
						}
					}
				}
			case "properties", "additionalProperties":
				mv, ok := v.(map[string]any)
				if !ok || m.Key == "additionalProperties" {
					continue // handled with properties below
				}
				props := m.Value.(object)
				extra, _ := s.get("additionalProperties")
				for _, k := range sortedKeys(mv) {
					if ps, ok := props.get(k); ok {
						walk(ps.(object), mv[k], path+"/"+k)
						continue
					}
					switch extra := extra.(type) {
					case bool:
						if !extra {
							bad("unknown property %q", k)
						}
					case object:
						walk(extra, mv[k], path+"/"+k)
					}
				}
			case "items":
				if av, ok := v.([]any); ok {
					for i, e := range av {
						walk(m.Value.(object), e, fmt.Sprintf("%s/%d", path, i))
					}
				}
			default:
				err = fmt.Errorf("%s: the test's validator does not know keyword %q", path, m.Key)
				return
			}
		}
		// additionalProperties without properties: a map.
		if _, hasProps := s.get("properties"); !hasProps {
			if extra, ok := s.get("additionalProperties"); ok {
				if mv, ok := v.(map[string]any); ok {
					for _, k := range sortedKeys(mv) {
						switch extra := extra.(type) {
						case bool:
							if !extra {
								bad("unknown property %q", k)
							}
						case object:
							walk(extra, mv[k], path+"/"+k)
						}
					}
				}
			}
		}
	}
	walk(schema, v, "")
	sort.Strings(problems)
	return problems, err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		return isNumber(v)
	case "integer":
		return isNumber(v) && number(v) == math.Trunc(number(v))
	case "null":
		return v == nil
	}
	return false
}

func jsonType(v any) string {
	switch {
	case v == nil:
		return "null"
	case isNumber(v):
		return "number"
	}
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return fmt.Sprintf("%T", v)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int64, float64, json.Number:
		return true
	}
	return false
}

func number(v any) float64 {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	case json.Number:
		f, _ := v.Float64()
		return f
	}
	return math.NaN()
}
