package clusterapi

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
