package cleanup

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/preemptible"
	"spotter.dev/spotter/internal/drain"
)

func mark(t *testing.T, m drain.Mark) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStrip(t *testing.T) {
	autoscalerTaint := corev1.Taint{Key: migrator.ToBeDeletedTaint, Value: "1", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name          string
		node          corev1.Node
		unschedulable bool
		taints        []string
		labels        []string
		annotations   []string
	}{{
		name: "every mark of Spotter's goes; the cordon its drain made too",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Labels: map[string]string{classify.InterruptibleLabel: "true", migrator.SelectedForDeletionLabel: "1", "team": "a"},
				Annotations: map[string]string{classify.LabeledByUsAnnotation: "true", interrupt.Annotation: "{}",
					drain.DrainingAnnotation: mark(t, drain.Mark{By: "migrator", Cordoned: true}), "note": "x"},
			},
			Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
				{Key: drain.DrainingTaintKey, Effect: corev1.TaintEffectNoSchedule},
				{Key: interrupt.TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule},
				{Key: labeler.OnDemandTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
				autoscalerTaint, other,
			}},
		},
		taints: []string{"dedicated"}, labels: []string{"team"}, annotations: []string{"note"},
	}, {
		name: "Cluster API's label, the autoscaler's taint and a cordon made by someone else stay",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{classify.InterruptibleLabel: ""},
				Annotations: map[string]string{drain.DrainingAnnotation: mark(t, drain.Mark{By: "agent"})},
			},
			Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{autoscalerTaint}},
		},
		unschedulable: true,
		taints:        []string{migrator.ToBeDeletedTaint}, labels: []string{classify.InterruptibleLabel},
	}, {
		name: "the agent's cordon goes with its record",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{interrupt.Annotation: `{"notices":{},"cordoned":true}`}},
			Spec:       corev1.NodeSpec{Unschedulable: true},
		},
	}, {
		name: "the preemptible controller's cordon goes with its record",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{preemptible.DrainedAnnotation: `{"at":"2026-01-01T00:00:00Z","runEnd":"2026-01-01T01:00:00Z","cordoned":true}`}},
			Spec:       corev1.NodeSpec{Unschedulable: true},
		},
	}, {
		name: "a preemptible record of a node cordoned by someone else: the cordon stays",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{preemptible.DrainedAnnotation: `{"at":"2026-01-01T00:00:00Z","runEnd":"2026-01-01T01:00:00Z"}`}},
			Spec:       corev1.NodeSpec{Unschedulable: true},
		},
		unschedulable: true,
	}, {
		name: "an unreadable drain mark goes, the cordon stays",
		node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{drain.DrainingAnnotation: "{"}},
			Spec:       corev1.NodeSpec{Unschedulable: true},
		},
		unschedulable: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node.DeepCopy()
			if changes := Strip(n); len(changes) == 0 {
				t.Fatal("no changes reported")
			}
			if n.Spec.Unschedulable != tc.unschedulable {
				t.Errorf("unschedulable %v, want %v", n.Spec.Unschedulable, tc.unschedulable)
			}
			var taints, labels, annotations []string
			for _, x := range n.Spec.Taints {
				taints = append(taints, x.Key)
			}
			for k := range n.Labels {
				labels = append(labels, k)
			}
			for k := range n.Annotations {
				annotations = append(annotations, k)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"taints", taints, tc.taints}, {"labels", labels, tc.labels}, {"annotations", annotations, tc.annotations}} {
				if strings.Join(c.got, ",") != strings.Join(c.want, ",") {
					t.Errorf("%s left: %v, want %v", c.what, c.got, c.want)
				}
			}
			if again := Strip(n); len(again) != 0 {
				t.Errorf("a second pass changed %v", again)
			}
		})
	}
}
