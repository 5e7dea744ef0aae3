package sim

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/plan"
)

// scheduler binds pending pods with the planner's fit engine (the
// kube-scheduler's own filter plugins) and a scoring that follows the default
// profile's score plugins and weights (see score).
type scheduler struct {
	w           *World
	e           *plan.Engine
	lastVersion uint64
	// unschedulable are the pods the last run could not place.
	unschedulable []*Pod
}

// pending are the pods waiting for a node, oldest first (the scheduling
// queue's order for pods of equal priority).
func (w *World) pending() []*Pod {
	var out []*Pod
	for _, p := range w.pods {
		if p.Node == nil && !p.Terminating && !p.lost && len(p.Obj.Spec.SchedulingGates) == 0 {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// boundObjs are the objects of the pods bound to nodes.
func (w *World) boundObjs() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		if p.Node != nil {
			out = append(out, p.Obj)
		}
	}
	return out
}

func nodeObjs(nodes []*Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n.Obj
	}
	return out
}

// run places the pending pods, unless nothing changed since the last run.
func (s *scheduler) run(ctx context.Context) error {
	w := s.w
	pending := w.pending()
	if len(pending) == 0 {
		s.unschedulable = nil
		return nil
	}
	if w.version == s.lastVersion {
		return nil
	}
	nodes := w.ReadyNodes()
	objs := make([]*corev1.Pod, len(pending))
	for i, p := range pending {
		objs[i] = p.Obj
	}
	placements, err := s.e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodeObjs(nodes), Pods: w.boundObjs(), Pending: objs, Pick: score})
	if err != nil {
		return err
	}
	byName := map[string]*Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	s.unschedulable = s.unschedulable[:0]
	for i, pl := range placements {
		if pl.Node == "" {
			s.unschedulable = append(s.unschedulable, pending[i])
			continue
		}
		w.bind(pending[i], byName[pl.Node])
	}
	s.lastVersion = w.version
	return nil
}

// score chooses among the nodes the filters accept, with the default
// profile's score plugins approximated and weighted as it weighs them:
//
//	3 × TaintToleration: fewer PreferNoSchedule taints the pod does not tolerate
//	2 × PodTopologySpread (default constraints): fewer pods of the same app on
//	    the node and in its zone
//	1 × NodeResourcesFit (LeastAllocated): more CPU and memory left
//	1 × NodeResourcesBalancedAllocation: CPU and memory used alike
//
// each normalized to 0..100 over the feasible nodes. Ties go to the first node
// (the oldest).
func score(pod *corev1.Pod, feasible []fwk.NodeInfo) int {
	if len(feasible) == 1 {
		return 0
	}
	app := pod.Labels[AppLabel]
	taints := make([]float64, len(feasible))
	host := make([]float64, len(feasible))
	zoneCount := map[string]float64{}
	var maxT, maxH, maxZ float64
	for i, ni := range feasible {
		for _, t := range ni.Node().Spec.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !tolerates(pod, &t) {
				taints[i]++
			}
		}
		for _, pi := range ni.GetPods() {
			if app != "" && pi.GetPod().Labels[AppLabel] == app && pi.GetPod().Namespace == pod.Namespace {
				host[i]++
			}
		}
		zoneCount[ni.Node().Labels[ZoneLabel]] += host[i]
		maxT, maxH = max(maxT, taints[i]), max(maxH, host[i])
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
	req := pod.Spec.Containers[0].Resources.Requests
	cpu, mem := float64(req.Cpu().MilliValue()), float64(req.Memory().Value())
	best, bestScore := 0, -1.0
	for i, ni := range feasible {
		alloc, used := ni.GetAllocatable(), ni.GetRequested()
		cpuFrac := (float64(used.GetMilliCPU()) + cpu) / max(float64(alloc.GetMilliCPU()), 1)
		memFrac := (float64(used.GetMemory()) + mem) / max(float64(alloc.GetMemory()), 1)
		least := 100 * ((1 - cpuFrac) + (1 - memFrac)) / 2
		balanced := 100 * (1 - abs(cpuFrac-memFrac))
		spread := (reverse(host[i], maxH) + reverse(zoneCount[ni.Node().Labels[ZoneLabel]], maxZ)) / 2
		s := 3*reverse(taints[i], maxT) + 2*spread + least + balanced
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func tolerates(pod *corev1.Pod, t *corev1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}
