// Package spotfirst is the spot-first controller: new pods wait for spot
// capacity for a while before they may take room on on-demand nodes.
//
// The kube-scheduler puts a new pod on any node with room, and the labeler's
// PreferNoSchedule taint only breaks ties: when spot is full, a new replica
// (a scale-up, or the replacement of a preempted pod) takes the room an
// on-demand node has, the cluster autoscaler is never asked for spot, and
// getting the pod back to spot later costs an eviction. With spot-first, an
// admission policy (the chart's MutatingAdmissionPolicy) puts the scheduling
// gate GateName on new pods; this controller then
//
//   - releases the pod at once (takes the gate off, nothing else) when it
//     cannot run on spot (no spot node the pod's node selector, required node
//     affinity and tolerations admit), has no controller that would recreate
//     it (a bare pod, a DaemonSet's or a Job's pod), is needed now (its owner
//     has no Ready pod, or a PodDisruptionBudget that selects it is short),
//     has a spread constraint the spot selector would narrow
//     (SpreadNarrowed), or its owner fell back lately;
//   - else steers it: adds the spot label those spot nodes carry to its node
//     selector (the API allows tightening a gated pod's node selector) and
//     takes the gate off, so that the scheduler places it on spot only and the
//     cluster autoscaler adds spot capacity for it;
//   - when a steered pod is still unbound FallbackAfter later, or its
//     workload has come to need it, deletes it (it never ran) and releases
//     its replacement without the spot selector: the fallback to on-demand.
package spotfirst

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/classify"
)

// Names this controller writes.
const (
	// GateName is the scheduling gate the admission policy puts on new pods.
	GateName = "spotter.dev/spot-first"
	// SteeredAnnotation records when a pod was steered to spot (RFC 3339): the
	// fallback counts from it, across restarts of the controller.
	SteeredAnnotation = "spotter.dev/spot-first-steered-at"
	// ReasonFallback is the Event reason of a steered pod deleted after
	// waiting FallbackAfter for spot.
	ReasonFallback = "SpotterSpotFirstFallback"
)

// owners are the controllers that recreate a deleted pod at once, as it
// was: the only pods the fallback may delete.
var owners = []string{"ReplicaSet", "StatefulSet"}

// Gated reports whether the pod carries the spot-first gate.
func Gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// Release returns the pod with the spot-first gate taken off (other gates
// stay).
func Release(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.SchedulingGates = slices.DeleteFunc(out.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if len(out.Spec.SchedulingGates) == 0 {
		out.Spec.SchedulingGates = nil
	}
	return out
}

// SpotLabel returns the well-known spot label (key and value, see
// classify.WellKnownLabels) to steer pod with, given the cluster's spot
// nodes: the label carried by the most of the spot nodes that admit the pod
// (its node selector and required node affinity match them, it tolerates
// their taints). ok is false when no spot node admits the pod or none of
// those carries a well-known spot label: the pod is not steered.
func SpotLabel(pod *corev1.Pod, spotNodes []*corev1.Node) (key, value string, ok bool) {
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	count := map[[2]string]int{}
	for _, n := range spotNodes {
		if match, err := required.Match(n); err != nil || !match || !toleratesAll(pod, n.Spec.Taints) {
			continue
		}
		for k, v := range n.Labels {
			if classify.WellKnownLabels[k][v] == classify.Spot {
				count[[2]string{k, v}]++
			}
		}
	}
	var best [2]string
	for kv, c := range count {
		// The most nodes; ties to the first key and value, for a stable answer.
		if c > count[best] || c == count[best] && (kv[0] < best[0] || kv[0] == best[0] && kv[1] < best[1]) {
			best = kv
		}
	}
	if count[best] == 0 {
		return "", "", false
	}
	return best[0], best[1], true
}

// SpreadNarrowed reports whether steering would change what one of the pod's
// topology spread constraints means: a DoNotSchedule constraint that honours
// the pod's node affinity (nodeAffinityPolicy Honor, the default) counts only
// the nodes the pod's node selector admits, so the spot selector would make
// it spread over the spot nodes' domains only. With minDomains above the
// zones that have spot nodes, a steered pod may fit no spot node the
// unsteered pod would: it waits out FallbackAfter and lands on on-demand,
// where a plan (which sees the pod as it will be recreated, unsteered) finds
// it room on spot again, and the rescheduler moves it in circles. Such pods
// are released, not steered.
func SpreadNarrowed(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule && (c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor) {
			return true
		}
	}
	return false
}

// Steer returns the pod released and restricted to nodes labelled key=value,
// with the time it was steered (RFC 3339) in SteeredAnnotation.
func Steer(pod *corev1.Pod, key, value, at string) *corev1.Pod {
	out := Release(pod)
	if out.Spec.NodeSelector == nil {
		out.Spec.NodeSelector = map[string]string{}
	}
	out.Spec.NodeSelector[key] = value
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[SteeredAnnotation] = at
	return out
}

// Recreated reports whether the pod's controller recreates it once deleted
// (a ReplicaSet or a StatefulSet owns it), and its UID.
func Recreated(pod *corev1.Pod) (types.UID, bool) {
	if ref := metav1.GetControllerOf(pod); ref != nil && slices.Contains(owners, ref.Kind) {
		return ref.UID, true
	}
	return "", false
}

// toleratesAll reports whether pod tolerates every NoSchedule and NoExecute
// taint of a spot node, save those that come and go with the node's state
// (see transient): a spot node under a notice or a drain still says what
// spot nodes look like.
func toleratesAll(pod *corev1.Pod, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule || transient(t.Key) {
			continue
		}
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return false
		}
	}
	return true
}

// transient are the taints of a node's state rather than its kind: the
// node lifecycle controller's (node.kubernetes.io/...), the cluster
// autoscaler's scale-down marks, and Spotter's own drain and interruption
// taints.
func transient(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/") ||
		key == "ToBeDeletedByClusterAutoscaler" || strings.HasPrefix(key, "spotter.dev/")
}
