package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Marshal writes c as YAML with its fields in the order of the Go types
// (apiVersion and kind first, then each section as documented), not sorted.
func Marshal(c *SpotterConfiguration) ([]byte, error) {
	// encoding/json keeps struct field order, and JSON is YAML: decoding it into a
	// yaml.Node keeps that order, and block style makes it read like a file.
	j, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	blockStyle(root)
	emptyCollections(root, reflect.TypeFor[SpotterConfiguration]())
	// TypeMeta encodes kind first; files conventionally start with apiVersion.
	if len(root.Content) >= 4 && root.Content[0].Value == "kind" && root.Content[2].Value == "apiVersion" {
		c := root.Content
		c[0], c[1], c[2], c[3] = c[2], c[3], c[0], c[1]
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		// Empty collections stay in flow style: {} and [] read better than nothing.
		if len(n.Content) > 0 {
			n.Style = 0
		}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style = 0 // let the encoder quote only what needs quotes
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// emptyCollections prints unset lists and maps as [] and {} instead of null, so
// that the printed file shows what kind of value each field takes.
func emptyCollections(n *yaml.Node, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null" && t.Kind() == reflect.Slice:
		*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null" && t.Kind() == reflect.Map:
		*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if ft, ok := fields[n.Content[i].Value]; ok {
				emptyCollections(n.Content[i+1], ft)
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 1; i < len(n.Content); i += 2 {
			emptyCollections(n.Content[i], t.Elem())
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for _, c := range n.Content {
			emptyCollections(c, t.Elem())
		}
	}
}

// DeepCopy returns a copy of c that shares no memory with it.
func (c *SpotterConfiguration) DeepCopy() *SpotterConfiguration {
	if c == nil {
		return nil
	}
	// Every field is plain data with a JSON form, so a JSON round trip is an
	// exact copy. NaN prices cannot be encoded; validation refuses them anyway.
	data, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("copying configuration: %v", err))
	}
	out := &SpotterConfiguration{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("copying configuration: %v", err))
	}
	return out
}
