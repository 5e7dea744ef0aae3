package v1alpha1

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

// docsPath is the configuration reference, generated from the doc comments in
// types.go and the defaults, so that it always matches the code. UPDATE_GOLDEN=1
// rewrites it.
const docsPath = "../../../../docs/configuration.md"

func TestConfigurationReferenceUpToDate(t *testing.T) {
	got := renderReference(t)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(docsPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("%v (run UPDATE_GOLDEN=1 go test ./pkg/apis/config/... to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date with types.go; run UPDATE_GOLDEN=1 go test ./pkg/apis/config/...", docsPath)
	}
}

// Every field carries a doc comment.
func TestEveryFieldDocumented(t *testing.T) {
	docs := fieldDocs(t)
	walkFields(reflect.TypeFor[SpotterConfiguration](), "", func(path string, owner reflect.Type, f reflect.StructField) {
		if docs[owner.Name()+"."+f.Name] == "" {
			t.Errorf("field %s (%s.%s) has no doc comment", path, owner.Name(), f.Name)
		}
	})
}

// fieldDocs maps "Type.Field" to the field's doc comment, read from types.go.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, f := range st.Fields.List {
			for _, name := range f.Names {
				docs[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(f.Doc.Text()), " ")
			}
		}
		return false
	})
	return docs
}

// walkFields calls fn for every leaf field under t (structs are descended into;
// lists and maps of structs too, with [] / [NAME] in the path).
func walkFields(t reflect.Type, prefix string, fn func(path string, owner reflect.Type, f reflect.StructField)) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.Contains(opts, "inline") {
			continue // apiVersion and kind are documented by hand
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fn(path, t, f)
		switch {
		case ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(jsonUnmarshaler):
			walkFields(ft, path+".", fn)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			walkFields(ft.Elem(), path+"[].", fn)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			walkFields(ft.Elem(), path+"[NAME].", fn)
		}
	}
}

func renderReference(t *testing.T) string {
	docs := fieldDocs(t)
	defaults := map[string]string{}
	data, err := json.Marshal(NewDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	flatten(tree, "", defaults)

	var b strings.Builder
	b.WriteString(`# Configuration reference

<!-- Generated from pkg/apis/config/v1alpha1/types.go by
     UPDATE_GOLDEN=1 go test ./pkg/apis/config/... ; do not edit. -->

Spotter reads one file: ` + "`apiVersion: " + APIVersion + "`, `kind: " + Kind + "`" + `.
It is decoded strictly (an unknown or misspelt field is an error naming its path
and line), defaulted, then validated; ` + "`spotter config validate -f FILE`" + ` prints
every problem at once, and ` + "`spotter config defaults`" + ` prints a complete file.
Command-line flags override the file.

Durations are written like ` + "`90s`, `5m` or `1h30m`" + `. Every field is optional.

| Field | Type | Default | Description |
|---|---|---|---|
`)
	walkFields(reflect.TypeFor[SpotterConfiguration](), "", func(path string, owner reflect.Type, f reflect.StructField) {
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(jsonUnmarshaler) {
			fmt.Fprintf(&b, "| **`%s`** | section | | %s |\n", path, escape(firstSentence(docs[owner.Name()+"."+f.Name])))
			return
		}
		def := "—"
		if v, ok := defaults[path]; ok {
			def = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", path, typeName(ft), def, escape(docs[owner.Name()+"."+f.Name]))
	})
	return b.String()
}

func flatten(v any, prefix string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 && prefix != "" {
			out[strings.TrimSuffix(prefix, ".")] = "{}"
		}
		for k, child := range v {
			flatten(child, prefix+k+".", out)
		}
	case []any:
		if len(v) == 0 {
			out[strings.TrimSuffix(prefix, ".")] = "[]"
		}
	case nil:
	default:
		out[strings.TrimSuffix(prefix, ".")] = fmt.Sprint(v)
	}
}

func typeName(t reflect.Type) string {
	switch {
	case t.Name() == "Duration":
		return "duration"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "list of " + t.Elem().Name()
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + typeName(t.Key()) + " to " + t.Elem().Name()
	case t.Kind() == reflect.Int32:
		return "integer"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	}
	return t.String()
}

func firstSentence(s string) string {
	var p doc.Package
	return p.Synopsis(s)
}

func escape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
