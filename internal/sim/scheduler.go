package sim

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/plan"
)

// scheduler binds pending pods with the planner's fit engine (the
// kube-scheduler's own filter plugins) and a scoring that follows the default
// profile's score plugins and weights (plan.ScorePick).
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
	placements, err := s.e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodeObjs(nodes), Pods: w.boundObjs(), Pending: objs, Pick: plan.ScorePick})
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
