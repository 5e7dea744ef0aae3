// Command chartschema keeps two files of the Helm chart in step with the code:
//
//   - charts/spotter/values.schema.json: its "config" property, the JSON Schema
//     of the SpotterConfiguration generated from the Go types of
//     pkg/apis/config/v1alpha1 (fields, types, enumerations, doc comments;
//     unknown fields refused). The rest of the schema is written by hand and
//     kept as it is.
//   - docs/install.md: the values reference table, between its markers, from
//     the comments of charts/spotter/values.yaml, its defaults and the types of
//     the schema.
//
// Run it from the repository's root after changing the configuration's types,
// values.yaml or the schema:
//
//	go run ./hack/chartschema          # rewrites both files
//	go run ./hack/chartschema -check   # fails when either is out of date
//
// TestGeneratedFilesUpToDate fails when the committed files differ from what it
// writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Paths of the files read and written, relative to the repository's root.
const (
	schemaPath  = "charts/spotter/values.schema.json"
	valuesPath  = "charts/spotter/values.yaml"
	installPath = "docs/install.md"
)

// Markers around the generated table in docs/install.md.
const (
	beginMarker = "<!-- BEGIN values reference: generated from charts/spotter/values.yaml and values.schema.json by `go run ./hack/chartschema`; do not edit. -->\n"
	endMarker   = "<!-- END values reference -->\n"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "only report files that are out of date (exit 1), write nothing")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "chartschema:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	files, err := generate(root)
	if err != nil {
		return err
	}
	var stale []string
	for _, path := range []string{schemaPath, installPath} {
		full := filepath.Join(root, path)
		old, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		if bytes.Equal(old, files[path]) {
			continue
		}
		if check {
			stale = append(stale, path)
			continue
		}
		if err := os.WriteFile(full, files[path], 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "chartschema: wrote", path)
	}
	if len(stale) > 0 {
		return fmt.Errorf("out of date: %s; run go run ./hack/chartschema", strings.Join(stale, ", "))
	}
	return nil
}

// generate returns the new contents of values.schema.json and docs/install.md
// (by path relative to root).
func generate(root string) (map[string][]byte, error) {
	docs, err := readTypeDocs(filepath.Join(root, typesFile))
	if err != nil {
		return nil, err
	}
	config, err := configSchema(docs)
	if err != nil {
		return nil, err
	}
	schema, err := readSchema(filepath.Join(root, schemaPath))
	if err != nil {
		return nil, err
	}
	props, _ := schema.get("properties")
	p, ok := props.(object)
	if !ok {
		return nil, fmt.Errorf("%s: no properties", schemaPath)
	}
	if _, ok := p.get("config"); !ok {
		return nil, fmt.Errorf("%s: no properties.config to generate", schemaPath)
	}
	p.set("config", config)
	schemaJSON, err := encodeOrdered(schema)
	if err != nil {
		return nil, err
	}

	values, err := os.ReadFile(filepath.Join(root, valuesPath))
	if err != nil {
		return nil, err
	}
	rows, missing, err := valuesRows(values, schema)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no \"# -- \" description for %s (on the key or a key around it)", valuesPath, strings.Join(missing, ", "))
	}
	install, err := os.ReadFile(filepath.Join(root, installPath))
	if err != nil {
		return nil, err
	}
	installMD, err := replaceBetween(install, referenceTable(rows))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", installPath, err)
	}
	return map[string][]byte{schemaPath: schemaJSON, installPath: installMD}, nil
}

func readSchema(path string) (object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := decodeOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o, ok := v.(object)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return o, nil
}

// replaceBetween puts text between the markers of doc.
func replaceBetween(doc []byte, text string) ([]byte, error) {
	s := string(doc)
	begin := strings.Index(s, beginMarker)
	end := strings.Index(s, endMarker)
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("the values reference markers are missing or out of order: want the lines %q and %q", strings.TrimSpace(beginMarker), strings.TrimSpace(endMarker))
	}
	return []byte(s[:begin+len(beginMarker)] + text + s[end:]), nil
}
