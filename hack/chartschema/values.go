package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// row is one line of the values reference: a value of values.yaml that
// carries a description comment.
type row struct {
	path, typ, def, desc string
}

// valuesRows reads values.yaml and returns a row for every key whose comment
// starts with "# -- " (the description runs to the first empty comment line
// or the key), in the file's order. Every value must be described, by its own
// comment or by one of an enclosing key: the others are returned as missing.
func valuesRows(valuesYAML []byte, schema object) (rows []row, missing []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("values.yaml is not a mapping")
	}
	defs, _ := schema.get("definitions")
	var walk func(n *yaml.Node, prefix string, described bool) error
	walk = func(n *yaml.Node, prefix string, described bool) error {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			path := prefix + key.Value
			desc := description(key.HeadComment)
			if desc != "" {
				var v any
				if err := value.Decode(&v); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				def, err := defaultText(v)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				rows = append(rows, row{path: path, typ: typeText(schemaAt(schema, defs, path)), def: def, desc: desc})
			}
			if value.Kind == yaml.MappingNode && len(value.Content) > 0 {
				if err := walk(value, path+".", described || desc != ""); err != nil {
					return err
				}
				continue
			}
			if desc == "" && !described {
				missing = append(missing, path)
			}
		}
		return nil
	}
	err = walk(doc.Content[0], "", false)
	return rows, missing, err
}

// defaultText is a default as the table shows it: a string as it is ("" when
// empty), anything else as compact JSON.
func defaultText(v any) (string, error) {
	if s, ok := v.(string); ok {
		if s == "" {
			return `""`, nil
		}
		return s, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// description is the text of a "# -- " comment, up to an empty comment line.
func description(comment string) string {
	var words []string
	started := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if !started {
			if rest, ok := strings.CutPrefix(line, "-- "); ok {
				started = true
				words = append(words, rest)
			}
			continue
		}
		if line == "" {
			break
		}
		words = append(words, line)
	}
	return strings.Join(words, " ")
}

// schemaAt returns the schema of the value at a dotted path, following
// local "#/definitions/NAME" references; nil when the schema has none.
func schemaAt(schema object, defs any, path string) object {
	s := resolve(schema, defs)
	for _, key := range strings.Split(path, ".") {
		props, _ := s.get("properties")
		p, ok := props.(object)
		if !ok {
			return nil
		}
		child, ok := p.get(key)
		if !ok {
			return nil
		}
		s = resolve(child.(object), defs)
	}
	return s
}

func resolve(s object, defs any) object {
	ref, ok := s.get("$ref")
	if !ok {
		return s
	}
	d, _ := defs.(object).get(strings.TrimPrefix(ref.(string), "#/definitions/"))
	return d.(object)
}

// typeText says in a few words what a schema allows.
func typeText(s object) string {
	if s == nil {
		return "?"
	}
	if enum, ok := s.get("enum"); ok {
		var names []string
		for _, v := range enum.([]any) {
			if v == "" {
				names = append(names, `""`)
				continue
			}
			names = append(names, fmt.Sprint(v))
		}
		return "one of " + strings.Join(names, ", ")
	}
	typ, _ := s.get("type")
	t := fmt.Sprint(typ)
	switch t {
	case "integer":
		if min, ok := s.get("minimum"); ok {
			t += fmt.Sprintf(" ≥ %v", min)
		}
		if max, ok := s.get("maximum"); ok {
			t += fmt.Sprintf(", ≤ %v", max)
		}
	case "array":
		if items, ok := s.get("items"); ok {
			if it, ok := items.(object).get("type"); ok {
				t = "list of " + fmt.Sprint(it)
			}
		}
	case "object":
		if ap, ok := s.get("additionalProperties"); ok {
			if o, ok := ap.(object); ok {
				if it, ok := o.get("type"); ok {
					t = "map of " + fmt.Sprint(it)
				}
			}
		}
	}
	return t
}

// referenceTable is the Markdown table of the values reference.
func referenceTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| Value | Type | Default | Description |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", r.path, cell(r.typ), cell(r.def), cell(r.desc))
	}
	return b.String()
}

func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
