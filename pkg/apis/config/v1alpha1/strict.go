package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

// DecodeStrict reads one YAML or JSON document into out, a pointer to a struct,
// the way configuration files are read: unknown fields (with the nearest known
// name suggested), duplicate keys and values of the wrong type are all reported,
// each with its field path and line, and every field that is right is still
// decoded, so that validation can report the rest. It returns the line of each
// field path, for validation messages. ok is false when the document could not
// be read at all.
//
// out's fields may be structs, pointers, maps with string keys, slices,
// strings, bools, int32s, float64s and types with their own JSON form (such as
// metav1.Duration and resource.Quantity); other kinds are reported as errors.
// Other file formats of Spotter (the simulator's scenarios) use it too.
func DecodeStrict(data []byte, out any) (lines map[string]int, errs field.ErrorList, ok bool) {
	return decodeStrict(data, out, "the document is empty")
}

// decodeStrict is DecodeStrict with the message for an empty document.
func decodeStrict(data []byte, out any, empty string) (lines map[string]int, errs field.ErrorList, ok bool) {
	root := field.NewPath("")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, field.ErrorList{field.Required(root, empty)}, false
		}
		return nil, field.ErrorList{field.Invalid(root, "", fmt.Sprintf("not YAML or JSON: %v", err))}, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, field.ErrorList{field.Invalid(root, "", "expected one YAML document, found more (remove the extra `---`)")}, false
	}

	lines = map[string]int{}
	checkNode(&doc, reflect.TypeOf(out), nil, lines, &errs)

	// Decode what checkNode left: the values of the wrong type are unset.
	dropNulls(&doc)
	checked, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(root, "", fmt.Sprintf("not YAML or JSON: %v", err))}, false
	}
	if j, err := sigsyaml.YAMLToJSON(checked); err != nil {
		errs = append(errs, field.Invalid(root, "", fmt.Sprintf("not YAML or JSON: %v", err)))
	} else if err := json.Unmarshal(j, out); err != nil && len(errs) == 0 {
		// checkNode reports every type error with its path; this is a backstop
		// for any it does not recognise.
		errs = append(errs, field.Invalid(root, "", err.Error()))
	}
	return lines, errs, true
}
