package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"reflect"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// typesFile is the Go file whose doc comments and constants describe the
// configuration's fields, relative to the repository's root.
const typesFile = "pkg/apis/config/v1alpha1/types.go"

// durationPattern matches what metav1.Duration accepts (time.ParseDuration)
// without a sign: every duration of the configuration is validated as 0 or
// more, so a negative one is refused here already.
const durationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

var (
	durationType  = reflect.TypeFor[metav1.Duration]()
	unmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	configPkgPath = reflect.TypeFor[v1alpha1.SpotterConfiguration]().PkgPath()
)

// typeDocs is what types.go says beside the Go types: the doc comment of each
// field ("Type.Field") and the string constants of each named type, in the
// order they are declared (the allowed values of an enumeration).
type typeDocs struct {
	fields map[string]string
	enums  map[string][]string
}

func readTypeDocs(path string) (*typeDocs, error) {
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	d := &typeDocs{fields: map[string]string{}, enums: map[string][]string{}}
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch spec := spec.(type) {
			case *ast.TypeSpec:
				st, ok := spec.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, f := range st.Fields.List {
					for _, name := range f.Names {
						d.fields[spec.Name.Name+"."+name.Name] = strings.Join(strings.Fields(f.Doc.Text()), " ")
					}
				}
			case *ast.ValueSpec:
				typ, ok := spec.Type.(*ast.Ident)
				if gd.Tok != token.CONST || !ok {
					continue
				}
				for _, v := range spec.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						return nil, err
					}
					d.enums[typ.Name] = append(d.enums[typ.Name], s)
				}
			}
		}
	}
	return d, nil
}

// configSchema is the JSON Schema of the chart's config value: a
// SpotterConfiguration without apiVersion and kind, as the strict decoder
// reads it (unknown fields refused), with each field's type, the allowed
// values of its enumeration and its doc comment. Ranges, cron expressions and
// the checks across fields stay with Spotter's own validation (`spotter
// config validate`), which runs when the pods start.
func configSchema(docs *typeDocs) (object, error) {
	s, err := structSchema(reflect.TypeFor[v1alpha1.SpotterConfiguration](), docs)
	if err != nil {
		return nil, err
	}
	return append(object{
		{"description", "The SpotterConfiguration without apiVersion and kind, which the chart adds (docs/configuration.md). Generated from " + typesFile + " by `go run ./hack/chartschema`."},
	}, s...), nil
}

func structSchema(t reflect.Type, docs *typeDocs) (object, error) {
	var props object
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.Contains(opts, "inline") {
			continue // apiVersion and kind: the chart writes them
		}
		if name == "" || name == "-" {
			return nil, fmt.Errorf("%s.%s: no JSON name", t.Name(), f.Name)
		}
		doc := docs.fields[t.Name()+"."+f.Name]
		if doc == "" {
			return nil, fmt.Errorf("%s.%s has no doc comment in %s", t.Name(), f.Name, typesFile)
		}
		fs, err := fieldSchema(f.Type, docs)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props = append(props, member{name, append(object{{"description", doc}}, fs...)})
	}
	return object{
		{"type", "object"},
		{"additionalProperties", false},
		{"properties", props},
	}, nil
}

func fieldSchema(t reflect.Type, docs *typeDocs) (object, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return object{{"type", "string"}, {"pattern", durationPattern}}, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(unmarshaler) {
			return nil, fmt.Errorf("type %s decodes itself: teach hack/chartschema its form", t)
		}
		return structSchema(t, docs)
	case reflect.Slice:
		items, err := fieldSchema(t.Elem(), docs)
		if err != nil {
			return nil, err
		}
		return object{{"type", "array"}, {"items", items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %s: only string keys exist in JSON", t.Key())
		}
		values, err := fieldSchema(t.Elem(), docs)
		if err != nil {
			return nil, err
		}
		return object{{"type", "object"}, {"additionalProperties", values}}, nil
	case reflect.Bool:
		return object{{"type", "boolean"}}, nil
	case reflect.String:
		s := object{{"type", "string"}}
		if t.PkgPath() == configPkgPath {
			values := docs.enums[t.Name()]
			if len(values) == 0 {
				return nil, fmt.Errorf("string type %s has no constants in %s", t.Name(), typesFile)
			}
			enum := make([]any, len(values))
			for i, v := range values {
				enum[i] = v
			}
			s = append(s, member{"enum", enum})
		}
		return s, nil
	case reflect.Int32:
		// 0 stands for the default where a count has one.
		return object{{"type", "integer"}, {"minimum", 0}, {"maximum", math.MaxInt32}}, nil
	case reflect.Float64:
		return object{{"type", "number"}}, nil
	}
	return nil, fmt.Errorf("type %s: teach hack/chartschema its JSON Schema", t)
}
