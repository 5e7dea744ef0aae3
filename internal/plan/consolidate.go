package plan

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Consolidation configures plans that empty an on-demand node whose pods do
// not all fit on spot: each pod goes to a spot node if one fits it, else to an
// on-demand node that stays, so that pods that must stay on on-demand capacity
// are packed onto fewer on-demand nodes.
type Consolidation struct {
	// Enabled turns such plans on.
	Enabled bool
	// MinHourlySavingPerEviction is the least hourly saving (the emptied
	// node's price, in the prices' currency) per evicted pod that justifies
	// a consolidation: a node whose price is unknown, or too low for the
	// evictions it takes, is not consolidated.
	MinHourlySavingPerEviction float64
}

// consolidation is the state of the consolidation pass of a plan.
type consolidation struct {
	// pinned memoizes pinned by pod index: 0 not asked yet, 1 no, 2 yes.
	pinned []int8
	// receivers are the on-demand nodes that got pods: they stay.
	receivers map[string]bool
	// emptied are the nodes the plan empties: they receive nothing.
	emptied map[string]bool
	// onDemand are the on-demand nodes, by name.
	onDemand []string
}

// consolidate is the last pass of a plan: each candidate that is not
// drainable onto spot alone, emptiest first, is planned again with on-demand
// nodes that stay as further destinations (see Consolidation). A node that
// received pods is never emptied, and an emptied node receives none. A node
// that cannot be consolidated keeps the verdict and reason of the spot-only
// passes.
func (r *run) consolidate(ctx context.Context, candidates []*NodePlan, podsOf map[*NodePlan][]int32) error {
	c := &consolidation{receivers: map[string]bool{}, emptied: map[string]bool{}, pinned: make([]int8, len(r.pods))}
	var leftover []*NodePlan
	for _, np := range candidates {
		c.onDemand = append(c.onDemand, np.Name)
		if np.Drainable {
			c.emptied[np.Name] = true
		} else {
			leftover = append(leftover, np)
		}
	}
	if len(leftover) == 0 || len(c.onDemand) < 2 || len(r.spot) == 0 {
		return nil
	}
	// Pods of on-demand nodes are left out of the snapshot until a plugin
	// needs them (fitter.deferred); as destinations, their nodes need them.
	if err := r.fit.materialize(); err != nil {
		return err
	}
	slices.Sort(c.onDemand)
	r.consolidating = c
	defer func() { r.consolidating = nil }()
	for _, np := range leftover {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.receivers[np.Name] || !r.worthConsolidating(ctx, np, podsOf[np]) {
			continue
		}
		before := *np
		before.Pods = slices.Clone(np.Pods)
		if _, err := r.planNode(ctx, np, podsOf[np]); err != nil {
			return err
		}
		if !np.Drainable {
			*np = before
			continue
		}
		// The node is emptied either way; when everything fitted on spot
		// after all (rare), it is a plain drain, not a consolidation.
		c.emptied[np.Name] = true
		for i := range np.Pods {
			if np.Pods[i].OnDemand {
				c.receivers[np.Pods[i].Destination] = true
				np.Consolidated = true
			}
		}
	}
	return nil
}

// worthConsolidating reports whether a node's price justifies the evictions
// that empty it, that none of its pods blocks it, and that one of them is
// pinned to on-demand capacity (else the spot-only passes said it all).
func (r *run) worthConsolidating(ctx context.Context, np *NodePlan, idx []int32) bool {
	moves := 0
	for _, j := range idx {
		switch r.facts[j].verdict.Action {
		case Move:
			moves++
		case Block:
			return false
		}
	}
	if moves == 0 || np.HourlyPrice <= 0 || np.HourlyPrice/float64(moves) < r.opts.Consolidation.MinHourlySavingPerEviction {
		return false
	}
	for _, j := range idx {
		if r.facts[j].verdict.Action == Move && r.pinnedAt(ctx, j) {
			return true
		}
	}
	return false
}

// pinned reports whether no spot node would ever take pod: the static
// plugins (the nodes' labels, taints and cordons against the pod's node
// selector, affinity and tolerations) reject every one. Only such pods go to
// on-demand nodes in a consolidation; a pod that could run on spot and finds
// no room there keeps its node where it is.
func (r *run) pinned(ctx context.Context, pod *corev1.Pod) bool {
	if !r.exhaustive {
		return len(r.staticFit(ctx, pod, r.templates.of(pod)).feasible) == 0
	}
	replacement := *pod
	replacement.Spec.NodeName = ""
	state := framework.NewCycleState()
	result, status, _ := r.fit.static.RunPreFilterPlugins(ctx, state, &replacement)
	if !status.IsSuccess() && !status.IsSkip() {
		return true
	}
	for i, name := range r.spot {
		if result != nil && result.NodeNames != nil && !result.NodeNames.Has(name) {
			continue
		}
		if r.fit.static.RunFilterPlugins(ctx, state, &replacement, r.spotInfo[i]).IsSuccess() {
			return false
		}
	}
	return true
}

// pinnedAt is pinned for the pod of index j, asked once per plan.
func (r *run) pinnedAt(ctx context.Context, j int32) bool {
	memo := r.consolidating.pinned
	if memo[j] == 0 {
		memo[j] = 1
		if r.pinned(ctx, r.pods[j]) {
			memo[j] = 2
		}
	}
	return memo[j] == 2
}

// placeOnDemand finds the best-fitting on-demand node for pod (spec.nodeName
// empty) among those that stay: not from, not emptied by the plan. It
// commits a copy bound to it and returns the node and the copy, or "" and why
// none fits, as place does for spot nodes.
func (r *run) placeOnDemand(ctx context.Context, pod, orig *corev1.Pod, res fwk.PodResource, from string) (string, string, *corev1.Pod) {
	c := r.consolidating
	cpu, mem := res.Resource.GetMilliCPU(), res.Resource.GetMemory()
	rejected := map[string]int{}
	var cands []candidate
	var infos []fwk.NodeInfo
	for _, name := range c.onDemand {
		if name == from || c.emptied[name] {
			continue
		}
		ni := r.fit.nodeInfo(name)
		if ni == nil {
			continue
		}
		n := roomOf(ni)
		if reason := n.fits(cpu, mem); reason != "" {
			rejected[reason]++
			continue
		}
		cands = append(cands, candidate{len(infos), n.score(cpu, mem)})
		infos = append(infos, ni)
	}
	total := len(infos)
	for _, n := range rejected {
		total += n
	}
	if total == 0 {
		return "", "no other on-demand node stays", nil
	}
	slices.SortFunc(cands, better)
	if len(cands) > 0 {
		cyc, status := r.fit.cycleFor(ctx, pod, r.templates.of(orig))
		if status != nil {
			return "", describe(status), nil
		}
		for _, cand := range cands {
			ni := infos[cand.i]
			name := ni.Node().Name
			var st *fwk.Status
			if _, ok := cyc.only[name]; cyc.only != nil && !ok {
				st = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't match PreFilter's node names")
			} else {
				st = r.fit.filter(ctx, cyc, pod, ni)
			}
			if st.IsSuccess() {
				placed := *pod
				placed.Spec.NodeName = name
				if err := r.fit.add(&placed, name, res); err != nil {
					return "", fmt.Sprintf("adding to the snapshot: %v", err), nil
				}
				return name, "", &placed
			}
			rejected[describe(st)]++
		}
	}
	return "", summarize(rejected, total, "other on-demand nodes"), nil
}

// FitsOnDemand reports whether pod, taken off its node, would fit on another
// on-demand node of s now: the node a consolidation would choose, or "" and
// why none fits. The drains of consolidations re-check the pods their plans
// sent to on-demand nodes with it.
func (p *Planner) FitsOnDemand(ctx context.Context, s *snapshot.Snapshot, pod *corev1.Pod) (string, string, error) {
	return p.NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil }).FitsOnDemand(ctx, pod)
}

// ConfigOptions are the planner options a configuration sets: the
// movability rules, the prices and consolidation. `spotter plan` and the
// controllers plan with them.
func ConfigOptions(cfg *v1alpha1.SpotterConfiguration, classifier *classify.Classifier) Options {
	o := Options{
		Rules:      Rules{AllowUnreplicated: cfg.Planner.AllowUnreplicatedPods, AllowLocalStorage: cfg.Planner.AllowLocalStorage},
		Classifier: classifier,
		Pricing:    cfg.Pricing,
	}
	c := cfg.Planner.Consolidation
	o.Consolidation.Enabled = c.Enabled != nil && *c.Enabled
	if c.MinHourlySavingPerEviction != nil {
		o.Consolidation.MinHourlySavingPerEviction = *c.MinHourlySavingPerEviction
	}
	return o
}
