package world

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/plan"
)

// StaticFit answers, once per app and node group, whether the app's pod
// passes the filter plugins on an empty node of the group. Every node of a
// group carries the labels of the group's template and at most more taints
// and a cordon, and a node with pods has less room than an empty one, so for
// a pod without required pod affinity (which other pods can satisfy: such a
// pod is always said to fit) a "no" means it fits no node of the group,
// ever: the seeds and the
// autoscaler skip the scheduling questions whose answer it already gives
// (an exact shortcut: sim.Options.exhaustive turns it off, and a test checks that
// the answers do not change).
type StaticFit struct {
	w     *World
	e     *plan.Engine
	index map[*Group]int
	// known holds, by app and group index: 0 not asked yet, 1 fits, -1 not.
	known map[*App][]int8
}

// NewStaticFit is an empty cache of the world's groups, asked of e.
func NewStaticFit(w *World, e *plan.Engine) *StaticFit {
	f := &StaticFit{w: w, e: e, index: map[*Group]int{}, known: map[*App][]int8{}}
	for i, g := range w.Groups {
		f.index[g] = i
	}
	return f
}

// Fits reports whether a's pod passes the filter plugins on an empty node of
// g.
func (f *StaticFit) Fits(ctx context.Context, a *App, g *Group) (bool, error) {
	row := f.known[a]
	if row == nil {
		row = make([]int8, len(f.w.Groups))
		f.known[a] = row
	}
	i := f.index[g]
	if aff := a.Template.Spec.Affinity; row[i] == 0 && aff != nil && aff.PodAffinity != nil &&
		len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		row[i] = 1
	}
	if row[i] == 0 {
		probe := a.Template.DeepCopy()
		probe.Name, probe.Spec.NodeName = a.Name+"-static-fit", ""
		placed, err := f.e.Schedule(ctx, plan.ScheduleRequest{Nodes: []*corev1.Node{f.w.Template(g, 0)}, Pending: []*corev1.Pod{probe},
			Pick: func(*corev1.Pod, []fwk.NodeInfo) int { return 0 }})
		if err != nil {
			return false, err
		}
		row[i] = -1
		if placed[0].Node != "" {
			row[i] = 1
		}
	}
	return row[i] > 0, nil
}

// FitsAny reports whether a's pod passes the filter plugins on an empty node
// of one of the groups for which want is true.
func (f *StaticFit) FitsAny(ctx context.Context, a *App, want func(*Group) bool) (bool, error) {
	for _, g := range f.w.Groups {
		if !want(g) {
			continue
		}
		ok, err := f.Fits(ctx, a, g)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}
