package capiinfra

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestTemplateSchemaMatchesMachine: a LabMachineTemplate's spec.template.spec
// becomes a LabMachine's spec, so the two schemas must not drift apart.
func TestTemplateSchemaMatchesMachine(t *testing.T) {
	specs := map[string]any{}
	for _, data := range CRDs() {
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		kind := dig(crd, "spec", "names", "kind")
		schema := dig(crd, "spec", "versions").([]any)[0]
		props := dig(schema.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec")
		switch kind {
		case KindMachine:
			specs[KindMachine] = props
		case KindMachineTemplate:
			specs[KindMachineTemplate] = dig(props.(map[string]any), "properties", "template", "properties", "spec")
		case KindMachinePool:
			specs[KindMachinePool] = dig(props.(map[string]any), "properties", "template")
		}
	}
	if specs[KindMachine] == nil || specs[KindMachineTemplate] == nil || specs[KindMachinePool] == nil {
		t.Fatalf("schemas not found: %v", specs)
	}
	if !reflect.DeepEqual(specs[KindMachine], specs[KindMachineTemplate]) {
		t.Errorf("LabMachine spec and LabMachineTemplate spec.template.spec differ:\n%v\n%v", specs[KindMachine], specs[KindMachineTemplate])
	}
	if !reflect.DeepEqual(specs[KindMachine], specs[KindMachinePool]) {
		t.Errorf("LabMachine spec and LabMachinePool spec.template differ:\n%v\n%v", specs[KindMachine], specs[KindMachinePool])
	}
}

// TestPoolLabelValue: the pool-name label value is Cluster API's
// (format.MustFormatValue; the expected hash is from its own test).
func TestPoolLabelValue(t *testing.T) {
	long := strings.Repeat("machineSetName", 12)
	for name, want := range map[string]string{"ms1": "ms1", "machineSetName": "machineSetName", long: "hash_FR_ghQ_z"} {
		if got := poolLabelValue(name); got != want {
			t.Errorf("poolLabelValue(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestMachinePoolSpecRoundTrip: what NewLabMachinePool writes, the pool
// controller reads back.
func TestMachinePoolSpecRoundTrip(t *testing.T) {
	spec := MachineSpec{Spot: true, InstanceType: "m5.large", CPU: "4", NodeLabels: map[string]string{"a": "b"}}
	got, err := machineSpecOf(NewLabMachinePool("ns", "p", spec, true).Object, "spec", "template")
	if err != nil || !reflect.DeepEqual(got, spec) {
		t.Errorf("got %+v, %v; want %+v", got, err, spec)
	}
}

// TestMachineSpecRoundTrip: what the builders write, the controller reads back.
func TestMachineSpecRoundTrip(t *testing.T) {
	for name, spec := range map[string]MachineSpec{
		"empty":              {},
		"on-demand":          {InstanceType: "m5.large", Zone: "zone-c", CPU: "4", Memory: "16Gi", Pods: "50"},
		"spot":               {Spot: true, MaxPrice: "0.05", NodeLabels: map[string]string{"a": "b"}},
		"spot, no max price": {Spot: true},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := NewMachineTemplate("ns", "t", spec)
			got, err := machineSpecOf(tmpl.Object, "spec", "template", "spec")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, spec) {
				t.Errorf("got %+v, want %+v", got, spec)
			}
		})
	}
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[p]
	}
	return cur
}
