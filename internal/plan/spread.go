package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/snapshot"
)

// maxSpreadWarnings is how many workloads SpreadWarnings names; the rest are
// counted.
const maxSpreadWarnings = 10

// SpreadWarnings names the workloads whose pods must spread over zones (a
// topology spread constraint on topology.kubernetes.io/zone, DoNotSchedule)
// without minDomains. The scheduler spreads such pods over the zones that
// have nodes only: when spot capacity leaves a zone and its last nodes go,
// the workload's new pods crowd into the zones left, nothing asks an
// autoscaler for a node in the missing zone, and the pods stay where they
// were put when the zone comes back. With minDomains set to the number of
// zones, a pod that would crowd the others waits instead, and an autoscaler
// brings a node back to the missing zone (docs/planner.md, "Zone spread").
// It returns one line, or none; workloads are named once, by their
// Deployment, StatefulSet or other controller.
func SpreadWarnings(s *snapshot.Snapshot) []string {
	deploymentOf := make(map[types.UID]string, len(s.ReplicaSets))
	for _, rs := range s.ReplicaSets {
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
			deploymentOf[rs.UID] = ref.Name
		}
	}
	seen := map[string]bool{}
	var names []string
	for _, pod := range s.Pods {
		if terminal(pod) || !spreadsWithoutMinDomains(pod) {
			continue
		}
		name := workloadOf(pod, deploymentOf)
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.SortFunc(names, cmp.Compare)
	more := ""
	if len(names) > maxSpreadWarnings {
		more = fmt.Sprintf(" and %d more", len(names)-maxSpreadWarnings)
		names = names[:maxSpreadWarnings]
	}
	return []string{fmt.Sprintf("%d workload(s) spread over zones (%s, DoNotSchedule) without minDomains: %s%s. "+
		"If spot capacity leaves a zone and its last node goes, their pods crowd into the zones left and no autoscaler is asked for the missing zone; "+
		"set minDomains to the number of zones (docs/planner.md, \"Zone spread\")",
		len(seen), corev1.LabelTopologyZone, strings.Join(names, ", "), more)}
}

// spreadsWithoutMinDomains reports whether pod has a DoNotSchedule spread
// constraint over zones without minDomains.
func spreadsWithoutMinDomains(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.TopologyKey == corev1.LabelTopologyZone && c.WhenUnsatisfiable == corev1.DoNotSchedule && c.MinDomains == nil {
			return true
		}
	}
	return false
}

// workloadOf names a pod's workload: namespace/name (Kind) of its controller,
// the Deployment of a ReplicaSet when the snapshot has that ReplicaSet, or
// the pod itself when it has no controller.
func workloadOf(pod *corev1.Pod, deploymentOf map[types.UID]string) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return fmt.Sprintf("%s/%s (Pod)", pod.Namespace, pod.Name)
	}
	if d, ok := deploymentOf[ref.UID]; ok && ref.Kind == "ReplicaSet" {
		return fmt.Sprintf("%s/%s (Deployment)", pod.Namespace, d)
	}
	return fmt.Sprintf("%s/%s (%s)", pod.Namespace, ref.Name, ref.Kind)
}
