package spotfirst

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/classify"
	tu "spotter.dev/spotter/internal/testutil"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestSpotLabel(t *testing.T) {
	karpenter := map[string]string{classify.KarpenterCapacityLabel: "spot", "zone": "a"}
	gke := map[string]string{classify.GKESpotLabel: "true", "zone": "b"}
	gkeTaint := corev1.Taint{Key: classify.GKESpotLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	draining := corev1.Taint{Key: "spotter.dev/draining", Value: "agent", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		nodes      []*corev1.Node
		key, value string
		ok         bool
	}{
		{"no spot node", tu.Pod("p"), nil, "", "", false},
		{"a spot node without a well-known label", tu.Pod("p"), []*corev1.Node{node("s", map[string]string{"pool": "spot"})}, "", "", false},
		{"the label of the spot node", tu.Pod("p"), []*corev1.Node{node("s", karpenter)}, classify.KarpenterCapacityLabel, "spot", true},
		{"the label most spot nodes carry", tu.Pod("p"),
			[]*corev1.Node{node("a", karpenter), node("b", gke), node("c", gke)}, classify.GKESpotLabel, "true", true},
		{"only the nodes that admit the pod count", tu.Pod("p", tu.RequireNodeLabel("zone", "a")),
			[]*corev1.Node{node("a", karpenter), node("b", gke), node("c", gke)}, classify.KarpenterCapacityLabel, "spot", true},
		{"pinned away from spot", tu.Pod("p", tu.RequireNodeLabel(classify.KarpenterCapacityLabel, "on-demand")),
			[]*corev1.Node{node("a", karpenter)}, "", "", false},
		{"a taint the pod does not tolerate", tu.Pod("p"), []*corev1.Node{node("b", gke, gkeTaint)}, "", "", false},
		{"a taint the pod tolerates", tu.Pod("p", tu.Tolerate(classify.GKESpotLabel, "true")),
			[]*corev1.Node{node("b", gke, gkeTaint)}, classify.GKESpotLabel, "true", true},
		{"a drain's taint says nothing of the kind of node", tu.Pod("p"), []*corev1.Node{node("a", karpenter, draining)},
			classify.KarpenterCapacityLabel, "spot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, value, ok := SpotLabel(tc.pod, tc.nodes)
			if key != tc.key || value != tc.value || ok != tc.ok {
				t.Errorf("SpotLabel = %q, %q, %v; want %q, %q, %v", key, value, ok, tc.key, tc.value, tc.ok)
			}
		})
	}
}

func TestSteerAndRelease(t *testing.T) {
	pod := tu.Pod("p")
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "other"}, {Name: GateName}}
	pod.Spec.NodeSelector = map[string]string{"zone": "a"}
	if !Gated(pod) {
		t.Fatal("the pod is gated")
	}
	released := Release(pod)
	if Gated(released) || len(released.Spec.SchedulingGates) != 1 || released.Spec.SchedulingGates[0].Name != "other" {
		t.Errorf("released gates %v; want only the other gate", released.Spec.SchedulingGates)
	}
	if !Gated(pod) {
		t.Error("Release changed its argument")
	}
	steered := Steer(pod, classify.KarpenterCapacityLabel, "spot", "2026-11-27T18:00:00Z")
	if Gated(steered) || steered.Spec.NodeSelector["zone"] != "a" || steered.Spec.NodeSelector[classify.KarpenterCapacityLabel] != "spot" ||
		steered.Annotations[SteeredAnnotation] != "2026-11-27T18:00:00Z" {
		t.Errorf("steered: gates %v, node selector %v, annotations %v", steered.Spec.SchedulingGates, steered.Spec.NodeSelector, steered.Annotations)
	}
	if len(pod.Spec.NodeSelector) != 1 {
		t.Error("Steer changed its argument")
	}
}

func TestRecreated(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want bool
	}{{"ReplicaSet", true}, {"StatefulSet", true}, {"DaemonSet", false}, {"Job", false}, {"", false}} {
		pod := tu.Pod("p")
		if tc.kind != "" {
			pod = tu.Pod("p", tu.OwnedBy(tc.kind, "o"))
		}
		if _, got := Recreated(pod); got != tc.want {
			t.Errorf("owner %q: Recreated %v, want %v", tc.kind, got, tc.want)
		}
	}
}

func TestWithinBudget(t *testing.T) {
	pdb := func(healthy, desired int32) policyv1.PodDisruptionBudget {
		b := *tu.PDB("web", "web", tu.MaxUnavailable(1))
		b.Status.CurrentHealthy, b.Status.DesiredHealthy = healthy, desired
		return b
	}
	pod := tu.Pod("web-new", tu.WithLabels("app", "web"), tu.OwnedBy("ReplicaSet", "web"))
	owner := types.UID("ReplicaSet-web")
	for _, tc := range []struct {
		name  string
		pdbs  []policyv1.PodDisruptionBudget
		ready int
		want  bool
	}{
		{"budget met, a Ready pod: an extra replica", []policyv1.PodDisruptionBudget{pdb(3, 2)}, 3, true},
		{"budget exactly met", []policyv1.PodDisruptionBudget{pdb(2, 2)}, 2, true},
		{"budget short: needed now", []policyv1.PodDisruptionBudget{pdb(1, 2)}, 1, false},
		{"no Ready pod of the owner: needed now", []policyv1.PodDisruptionBudget{pdb(0, 0)}, 0, false},
		{"no budget selects it, a Ready pod: an extra replica", nil, 3, true},
		{"no budget selects it, no Ready pod: needed now", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WithinBudget(pod, tc.pdbs, map[types.UID]int{owner: tc.ready}); got != tc.want {
				t.Errorf("WithinBudget = %v, want %v", got, tc.want)
			}
		})
	}
	// A short budget of another namespace or selecting other pods says
	// nothing.
	other, elsewhere := pdb(0, 2), pdb(0, 2)
	other.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
	elsewhere.Namespace = "other"
	if !WithinBudget(pod, []policyv1.PodDisruptionBudget{other, elsewhere}, map[types.UID]int{owner: 1}) {
		t.Error("a budget selecting other pods counted")
	}
}

// A DoNotSchedule spread constraint that honours node affinity (the
// default) is narrowed by the spot selector; one that ignores it, or a
// ScheduleAnyway one, is not.
func TestSpreadNarrowed(t *testing.T) {
	ignore := corev1.NodeInclusionPolicyIgnore
	honor := corev1.NodeInclusionPolicyHonor
	spread := func(opts ...func(*corev1.TopologySpreadConstraint)) *corev1.Pod {
		p := tu.Pod("p", tu.Spread("web", corev1.LabelTopologyZone, 1))
		for _, o := range opts {
			o(&p.Spec.TopologySpreadConstraints[0])
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no constraint", tu.Pod("p"), false},
		{"DoNotSchedule, default policy", spread(), true},
		{"DoNotSchedule, Honor", spread(func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &honor }), true},
		{"DoNotSchedule, Ignore", spread(func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore }), false},
		{"ScheduleAnyway", spread(func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = corev1.ScheduleAnyway }), false},
	} {
		if got := SpreadNarrowed(tc.pod); got != tc.want {
			t.Errorf("%s: SpreadNarrowed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
