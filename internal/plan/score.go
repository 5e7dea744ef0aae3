package plan

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// ScorePick is where the kube-scheduler's default profile would put pod
// among the nodes its filter plugins accept (never empty): the index of the
// node with the highest score, the score plugins approximated and weighted as
// the profile weighs them:
//
//	3 × TaintToleration: fewer PreferNoSchedule taints the pod does not tolerate
//	2 × PodTopologySpread (default constraints): fewer pods of the same
//	    controller on the node and in its zone
//	1 × NodeResourcesFit (LeastAllocated): more CPU and memory left
//	1 × NodeResourcesBalancedAllocation: CPU and memory used alike
//
// each normalized to 0..100 over the feasible nodes. Ties go to the first
// node. The simulator's scheduler places pods with it, and a consolidation's
// plan checks with it where the scheduler will put the pods it sends to
// on-demand nodes (run.scheduledInWaves).
func ScorePick(pod *corev1.Pod, feasible []fwk.NodeInfo) int {
	if len(feasible) == 1 {
		return 0
	}
	owner := metav1.GetControllerOfNoCopy(pod)
	taints := make([]float64, len(feasible))
	siblings := make([]float64, len(feasible))
	zoneCount := map[string]float64{}
	var maxT, maxS, maxZ float64
	for i, ni := range feasible {
		for _, t := range ni.Node().Spec.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !tolerates(pod, &t) {
				taints[i]++
			}
		}
		if owner != nil {
			for _, pi := range ni.GetPods() {
				if p := pi.GetPod(); p.Namespace == pod.Namespace && controlledBy(p, owner.UID) {
					siblings[i]++
				}
			}
		}
		zoneCount[ni.Node().Labels[corev1.LabelTopologyZone]] += siblings[i]
		maxT, maxS = max(maxT, taints[i]), max(maxS, siblings[i])
	}
	for _, c := range zoneCount {
		maxZ = max(maxZ, c)
	}
	reverse := func(v, maxV float64) float64 {
		if maxV == 0 {
			return 100
		}
		return 100 * (maxV - v) / maxV
	}
	var cpu, mem float64
	for _, c := range pod.Spec.Containers {
		cpu += float64(c.Resources.Requests.Cpu().MilliValue())
		mem += float64(c.Resources.Requests.Memory().Value())
	}
	best, bestScore := 0, -1.0
	for i, ni := range feasible {
		alloc, used := ni.GetAllocatable(), ni.GetRequested()
		cpuFrac := (float64(used.GetMilliCPU()) + cpu) / max(float64(alloc.GetMilliCPU()), 1)
		memFrac := (float64(used.GetMemory()) + mem) / max(float64(alloc.GetMemory()), 1)
		least := 100 * ((1 - cpuFrac) + (1 - memFrac)) / 2
		balanced := 100 * (1 - math.Abs(cpuFrac-memFrac))
		spread := (reverse(siblings[i], maxS) + reverse(zoneCount[ni.Node().Labels[corev1.LabelTopologyZone]], maxZ)) / 2
		s := 3*reverse(taints[i], maxT) + 2*spread + least + balanced
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// controlledBy reports whether pod's controller has uid.
func controlledBy(pod *corev1.Pod, uid types.UID) bool {
	for i := range pod.OwnerReferences {
		if r := &pod.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r.UID == uid
		}
	}
	return false
}

func tolerates(pod *corev1.Pod, t *corev1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}
