package clusterapi

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        map[string]string
		min, max int
		ok, bad  bool
	}{
		{name: "none: not a group", a: nil},
		{name: "both", a: map[string]string{MinSizeAnnotation: "1", MaxSizeAnnotation: "5"}, min: 1, max: 5, ok: true},
		{name: "only min", a: map[string]string{MinSizeAnnotation: "1"}, bad: true},
		{name: "only max", a: map[string]string{MaxSizeAnnotation: "1"}, bad: true},
		{name: "max below min", a: map[string]string{MinSizeAnnotation: "3", MaxSizeAnnotation: "2"}, bad: true},
		{name: "negative", a: map[string]string{MinSizeAnnotation: "-1", MaxSizeAnnotation: "2"}, bad: true},
		{name: "not a number", a: map[string]string{MinSizeAnnotation: "0", MaxSizeAnnotation: "ten"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			min, max, ok, err := sizes(tc.a)
			if tc.bad != errors.Is(err, errSizes) || ok != tc.ok || min != tc.min || max != tc.max {
				t.Errorf("sizes = %d, %d, %t, %v", min, max, ok, err)
			}
		})
	}
}

func TestCapacityAnnotations(t *testing.T) {
	c, err := capacityFromAnnotations(map[string]string{
		CapacityCPUAnnotation: "16", CapacityMemoryAnnotation: "128G", CapacityEphemeralDiskAnnotation: "100Gi",
		CapacityGPUCountAnnotation: "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[corev1.ResourceName]string{"cpu": "16", "memory": "128G", "ephemeral-storage": "100Gi", "pods": "110", "nvidia.com/gpu": "2"} {
		if q := c[name]; q.String() != want {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
	if c, err := capacityFromAnnotations(map[string]string{"other": "x"}); c != nil || err != nil {
		t.Errorf("no capacity annotations: %v, %v", c, err)
	}
	if _, err := capacityFromAnnotations(map[string]string{CapacityCPUAnnotation: "lots"}); err == nil {
		t.Error("a cpu that is no quantity was accepted")
	}
}

func TestLabelsAndTaints(t *testing.T) {
	l, err := parseLabels(" key1=value1, key2=value2,,empty= ")
	if err != nil || len(l) != 3 || l["key1"] != "value1" || l["key2"] != "value2" || l["empty"] != "" {
		t.Errorf("labels %v, %v", l, err)
	}
	if _, err := parseLabels("novalue"); err == nil {
		t.Error("a label without = was accepted")
	}
	ts, err := parseTaints("key1=value1:NoSchedule,key2:NoExecute")
	want := []corev1.Taint{{Key: "key1", Value: "value1", Effect: corev1.TaintEffectNoSchedule}, {Key: "key2", Effect: corev1.TaintEffectNoExecute}}
	if err != nil || len(ts) != 2 || ts[0] != want[0] || ts[1] != want[1] {
		t.Errorf("taints %v, %v", ts, err)
	}
	for _, bad := range []string{"key1=value1", "key1=value1:Sometimes", ":NoSchedule"} {
		if _, err := parseTaints(bad); err == nil {
			t.Errorf("taints %q accepted", bad)
		}
	}
}

// The annotations are written by people: no input makes the parsers panic,
// and what they accept is well formed.
func FuzzAnnotations(f *testing.F) {
	for _, s := range []string{"a=b,c=d", "k=v:NoSchedule,k:NoExecute", "", ",,", "=", "16", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if l, err := parseLabels(s); err == nil {
			for k := range l {
				if k == "" {
					t.Errorf("%q: empty label key", s)
				}
			}
		}
		if ts, err := parseTaints(s); err == nil {
			for _, tt := range ts {
				if tt.Key == "" || tt.Effect == "" {
					t.Errorf("%q: taint %v", s, tt)
				}
			}
		}
		_, _ = capacityFromAnnotations(map[string]string{CapacityCPUAnnotation: s, CapacityGPUCountAnnotation: s, CapacityGPUTypeAnnotation: s})
		_, _, _, _ = sizes(map[string]string{MinSizeAnnotation: s, MaxSizeAnnotation: s})
	})
}

// The one reader of spot fields reads infrastructure machine templates and
// infrastructure machine pools of the known providers alike.
func TestReadTemplateSpot(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	dist := func(base, pct any) map[string]any {
		d := map[string]any{}
		if base != nil {
			d["onDemandBaseCapacity"] = base
		}
		if pct != nil {
			d["onDemandPercentageAboveBaseCapacity"] = pct
		}
		return map[string]any{"mixedInstancesPolicy": map[string]any{"instancesDistribution": d}, "awsLaunchTemplate": map[string]any{"instanceType": "m5.large"}}
	}
	for _, tc := range []struct {
		name      string
		obj       *unstructured.Unstructured
		spotField string
		typ       string
	}{
		{"AWSMachineTemplate spot", obj(map[string]any{"template": map[string]any{"spec": map[string]any{"instanceType": "m5.large", "spotMarketOptions": map[string]any{}}}}),
			"spec.template.spec.spotMarketOptions", "m5.large"},
		{"AWSMachineTemplate on-demand", obj(map[string]any{"template": map[string]any{"spec": map[string]any{"instanceType": "m5.large"}}}), "", "m5.large"},
		{"GCPMachineTemplate Spot", obj(map[string]any{"template": map[string]any{"spec": map[string]any{"instanceType": "n2-standard-4", "provisioningModel": "Spot"}}}),
			"spec.template.spec.provisioningModel", "n2-standard-4"},
		{"AWSMachinePool launch template spot", obj(map[string]any{"awsLaunchTemplate": map[string]any{"instanceType": "m5.large", "spotMarketOptions": map[string]any{"maxPrice": "0.1"}}}),
			"spec.awsLaunchTemplate.spotMarketOptions", "m5.large"},
		{"AWSMachinePool all spot above no base", obj(dist(nil, int64(0))), "spec.mixedInstancesPolicy.instancesDistribution.onDemandPercentageAboveBaseCapacity", "m5.large"},
		{"AWSMachinePool all spot, base 0", obj(dist(int64(0), int64(0))), "spec.mixedInstancesPolicy.instancesDistribution.onDemandPercentageAboveBaseCapacity", "m5.large"},
		{"AWSMachinePool on-demand base", obj(dist(int64(1), int64(0))), "", "m5.large"},
		{"AWSMachinePool half spot", obj(dist(nil, int64(50))), "", "m5.large"},
		{"AWSMachinePool default distribution", obj(dist(nil, nil)), "", "m5.large"},
		{"AWSManagedMachinePool spot", obj(map[string]any{"capacityType": "spot"}), "spec.capacityType", ""},
		{"AWSManagedMachinePool on-demand", obj(map[string]any{"capacityType": "onDemand"}), "", ""},
		{"AzureMachinePool spot", obj(map[string]any{"template": map[string]any{"vmSize": "Standard_D4s_v3", "spotVMOptions": map[string]any{}}}),
			"spec.template.spotVMOptions", "Standard_D4s_v3"},
		{"AzureMachinePool regular", obj(map[string]any{"template": map[string]any{"vmSize": "Standard_D4s_v3"}}), "", "Standard_D4s_v3"},
		{"GCPMachinePool preemptible", obj(map[string]any{"instanceType": "n1-standard-2", "preemptible": true}), "spec.preemptible", "n1-standard-2"},
		{"LabMachinePool spot", obj(map[string]any{"template": map[string]any{"instanceType": "m5.xlarge", "spotMarketOptions": map[string]any{}}}),
			"spec.template.spotMarketOptions", "m5.xlarge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readTemplate(tc.obj)
			if f.spotField != tc.spotField || f.spot != (tc.spotField != "") || f.instanceType != tc.typ {
				t.Errorf("spot %t field %q type %q, want field %q type %q", f.spot, f.spotField, f.instanceType, tc.spotField, tc.typ)
			}
		})
	}
}
