package labeler

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/classify"
	tu "spotter.dev/spotter/internal/testutil"
)

func TestDesired(t *testing.T) {
	preferSpot := corev1.Taint{Key: OnDemandTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}
	other := tu.Taint("dedicated", "db", corev1.TaintEffectNoSchedule)
	ours := func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[classify.LabeledByUsAnnotation] = "true"
	}
	cases := []struct {
		name  string
		opts  Options
		node  *corev1.Node
		class classify.Class
		want  []string
	}{
		{"spot gets the label", Options{InterruptibleLabel: true}, tu.Node("n"), classify.Spot, []string{"add label cluster.x-k8s.io/interruptible=true"}},
		{"spot already labelled", Options{InterruptibleLabel: true}, tu.Node("n", tu.NodeLabel(InterruptibleLabel, "true")), classify.Spot, nil},
		{"label switched off", Options{}, tu.Node("n"), classify.Spot, nil},
		{"on-demand loses the label the labeler wrote", Options{InterruptibleLabel: true}, tu.Node("n", tu.NodeLabel(InterruptibleLabel, "true"), ours), classify.OnDemand, []string{"remove label cluster.x-k8s.io/interruptible"}},
		{"spot keeps Cluster API's empty value", Options{InterruptibleLabel: true}, tu.Node("n", tu.NodeLabel(InterruptibleLabel, "")), classify.Spot, nil},
		{"on-demand keeps the label Cluster API wrote", Options{InterruptibleLabel: true}, tu.Node("n", tu.NodeLabel(InterruptibleLabel, "true")), classify.OnDemand, nil},
		{"the mark goes with a label removed by hand", Options{InterruptibleLabel: true}, tu.Node("n", ours), classify.OnDemand, []string{"remove annotation spotter.dev/interruptible-labeled"}},
		{"unknown keeps a label others wrote", Options{InterruptibleLabel: true}, tu.Node("n", tu.NodeLabel(InterruptibleLabel, "true")), classify.Unknown, nil},
		{"on-demand gets the taint", Options{PreferSpotTaint: true}, tu.Node("n", other), classify.OnDemand, []string{"add taint spotter.dev/on-demand=true:PreferNoSchedule"}},
		{"taint already there", Options{PreferSpotTaint: true}, tu.Node("n", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{preferSpot} }), classify.OnDemand, nil},
		{"taint switched off", Options{}, tu.Node("n", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{preferSpot} }), classify.OnDemand, []string{"remove taint spotter.dev/on-demand=true:PreferNoSchedule"}},
		{"spot loses the taint", Options{PreferSpotTaint: true}, tu.Node("n", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{preferSpot} }), classify.Spot, []string{"remove taint spotter.dev/on-demand=true:PreferNoSchedule"}},
		{"wrong effect replaced", Options{PreferSpotTaint: true}, tu.Node("n", tu.Taint(OnDemandTaintKey, "true", corev1.TaintEffectNoSchedule)), classify.OnDemand,
			[]string{"remove taint spotter.dev/on-demand=true:NoSchedule", "add taint spotter.dev/on-demand=true:PreferNoSchedule"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(nil, &classify.Classifier{}, nil, tc.opts)
			out, changes := c.desired(tc.node, tc.class)
			if strings.Join(changes, "|") != strings.Join(tc.want, "|") {
				t.Errorf("changes %q, want %q", changes, tc.want)
			}
			for _, taint := range tc.node.Spec.Taints {
				if taint.Key == "dedicated" && (len(out.Spec.Taints) == 0 || out.Spec.Taints[0] != taint) {
					t.Errorf("other taints must stay first and unchanged: %v", out.Spec.Taints)
				}
			}
		})
	}
}
