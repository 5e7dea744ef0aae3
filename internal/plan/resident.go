package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/snapshot"
)

// Resident answers the question a drain asks before each eviction, "does
// this pod still fit where its plan sends it?" (FitsOnSpot, FitsOnDemand),
// from a scheduler snapshot it keeps between questions instead of building
// one from the whole cluster for each evicted pod. From the same snapshot it
// holds evictions while a pod of the same budget is on a node under a
// termination notice (HoldForNotices).
//
// It learns what changed from its feed: PodChanged for every pod added,
// changed or deleted, and Invalidate for every other change that can alter an
// answer (nodes, namespaces, volumes, the specs of PodDisruptionBudgets).
// Before a question it applies the pods
// changed since the last one to its snapshot, as the plan applies its own
// placements (each change is a removal and an addition, O(pod)), and it
// builds the snapshot again from read only when something other than a pod
// changed, when a new pod selects pods by a label key the snapshot does not
// index, or when it has applied more changes than the cluster has pods.
//
// Without a feed (Fed not called) it cannot know what changed, so it builds
// the snapshot for every question.
//
// The answers are those of Planner.FitsOnSpot and FitsOnDemand on the
// cluster as read now (TestResidentAnswersAsAFreshSnapshot). It is safe for
// concurrent use; questions are answered one at a time.
type Resident struct {
	p    *Planner
	read func(context.Context) (*snapshot.Snapshot, error)

	mu      sync.Mutex
	fed     bool
	st      *residentState
	pending map[types.UID]*corev1.Pod // the latest of each changed pod; nil: deleted
	stats   ResidentStats
}

// ResidentStats counts what a Resident did.
type ResidentStats struct {
	// Builds are the snapshots built from the whole cluster; Applied, the
	// pod changes applied to a kept one; Questions, the questions answered.
	Builds, Applied, Questions int
}

// residentState is the kept snapshot: the run over it and what the feed
// needs to bring it up to date.
type residentState struct {
	r        *run
	onDemand []string // the on-demand nodes, sorted (FitsOnDemand's destinations)
	// at holds every pod in the snapshot, with the node it is on.
	at map[types.UID]placedPod
	// noticed are the nodes under a termination notice (HoldForNotices).
	noticed map[string]bool
	// changes counts the pod changes applied; limit is when to build again.
	changes, limit int
}

type placedPod struct {
	pod  *corev1.Pod
	node string
}

// Residents are Residents fed from one source of changes.
type Residents []*Resident

// Fed calls Fed on each.
func (rs Residents) Fed() {
	for _, r := range rs {
		r.Fed()
	}
}

// PodChanged calls PodChanged on each.
func (rs Residents) PodChanged(old, pod *corev1.Pod) {
	for _, r := range rs {
		r.PodChanged(old, pod)
	}
}

// Invalidate calls Invalidate on each.
func (rs Residents) Invalidate() {
	for _, r := range rs {
		r.Invalidate()
	}
}

// NewResident returns a Resident that builds its snapshot from read.
func (p *Planner) NewResident(read func(context.Context) (*snapshot.Snapshot, error)) *Resident {
	return &Resident{p: p, read: read, pending: map[types.UID]*corev1.Pod{}}
}

// Fed says that PodChanged and Invalidate will be called for every change
// from now on; the next question builds the snapshot afresh.
func (r *Resident) Fed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fed, r.st = true, nil
	clear(r.pending)
}

// PodChanged records a pod added (old nil), changed, or deleted (pod nil).
func (r *Resident) PodChanged(old, pod *corev1.Pod) {
	uid := types.UID("")
	switch {
	case pod != nil:
		uid = pod.UID
	case old != nil:
		uid = old.UID
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st != nil {
		r.pending[uid] = pod
	}
}

// Invalidate records a change other than a pod's: the next question builds
// the snapshot afresh.
func (r *Resident) Invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st = nil
	clear(r.pending)
}

// Stats returns what the Resident did so far.
func (r *Resident) Stats() ResidentStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// FitsOnSpot is Planner.FitsOnSpot on the cluster as it is now.
func (r *Resident) FitsOnSpot(ctx context.Context, pod *corev1.Pod) (string, string, error) {
	return r.ask(ctx, pod, false)
}

// FitsOnDemand is Planner.FitsOnDemand on the cluster as it is now.
func (r *Resident) FitsOnDemand(ctx context.Context, pod *corev1.Pod) (string, string, error) {
	return r.ask(ctx, pod, true)
}

// SpotRecheck returns a hook for drain.Request.BeforeEvict: it holds an
// eviction as HoldForNotices does, and refuses to evict a pod that no longer
// fits on a spot node. The rescheduler and the migrator drain with it,
// because the cluster changes while a node drains.
func (r *Resident) SpotRecheck() func(context.Context, *corev1.Pod) error {
	return r.holdThen(refuseUnfit(r.FitsOnSpot, "spot"))
}

// OnDemandRecheck is SpotRecheck for the pods a consolidation sends to
// on-demand nodes that stay: it refuses to evict a pod that no longer fits
// on another on-demand node (FitsOnDemand).
func (r *Resident) OnDemandRecheck() func(context.Context, *corev1.Pod) error {
	return r.holdThen(refuseUnfit(r.FitsOnDemand, "another on-demand node"))
}

// holdThen asks HoldForNotices first, then check.
func (r *Resident) holdThen(check func(context.Context, *corev1.Pod) error) func(context.Context, *corev1.Pod) error {
	hold := r.HoldForNotices()
	return func(ctx context.Context, pod *corev1.Pod) error {
		if err := hold(ctx, pod); err != nil {
			return err
		}
		return check(ctx, pod)
	}
}

// HoldForNotices returns a hook for drain.Request.BeforeEvict that holds a
// voluntary eviction (an error wrapping drain.ErrNotNow: the drain asks
// again later) while another pod under one of the pod's
// PodDisruptionBudgets, not terminating, is on a node under a termination
// notice that keeps pods off it (the agent's interrupt.TaintKey with the
// value termination, NoSchedule). That pod goes with its node within the
// notice's deadline, evicted by the agent first when it drains: a voluntary
// eviction now would take the disruption the budget allows, the Eviction API
// would refuse the agent's, and the pod would go down with its node, below
// the budget. The hold ends when the pod is terminating (the agent evicted
// it) or gone, or the notice ended; the Eviction API then judges the
// voluntary eviction on the budget as it stands. Rebalance and maintenance
// notices hold nothing: their nodes may stay for hours.
func (r *Resident) HoldForNotices() func(context.Context, *corev1.Pod) error {
	return func(ctx context.Context, pod *corev1.Pod) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.current(ctx); err != nil {
			return err
		}
		st := r.st
		if len(st.noticed) == 0 {
			return nil
		}
		covers := st.r.budgets.covering(pod)
		if len(covers) == 0 {
			return nil
		}
		var held *placedPod // the first in namespace/name order, for a stable message
		var under *budget
		for uid, pp := range st.at {
			if !st.noticed[pp.node] || uid == pod.UID || pp.pod.DeletionTimestamp != nil || pp.pod.Namespace != pod.Namespace {
				continue
			}
			if held != nil && pp.pod.Name >= held.pod.Name {
				continue
			}
			for _, b := range st.r.budgets.covering(pp.pod) {
				if slices.Contains(covers, b) {
					held, under = &pp, b
					break
				}
			}
		}
		if held == nil {
			return nil
		}
		return fmt.Errorf("%w: pod %s/%s, under the same PodDisruptionBudget %s/%s, is on node %s under a termination notice: "+
			"its eviction before the node goes comes first", drain.ErrNotNow, held.pod.Namespace, held.pod.Name, under.pdb.Namespace, under.pdb.Name, held.node)
	}
}

// underNotice reports whether node is under a termination notice that keeps
// pods off it: it goes within the notice's deadline.
func underNotice(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == interrupt.TaintKey && t.Value == string(notice.Termination) && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// Recheck returns the hook for drain.Request.BeforeEvict of the drain np
// plans: the pods it sends to on-demand nodes that stay are re-checked with
// OnDemandRecheck, every other pod (those it displaces included) with
// SpotRecheck.
func (r *Resident) Recheck(np *NodePlan) func(context.Context, *corev1.Pod) error {
	spot, stays := r.SpotRecheck(), r.OnDemandRecheck()
	onDemand := np.OnDemandPods()
	return func(ctx context.Context, pod *corev1.Pod) error {
		if onDemand[pod.Namespace+"/"+pod.Name] {
			return stays(ctx, pod)
		}
		return spot(ctx, pod)
	}
}

func (r *Resident) ask(ctx context.Context, pod *corev1.Pod, onDemand bool) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Questions++
	if err := r.current(ctx); err != nil {
		return "", "", err
	}
	st := r.st
	run := st.r
	// Take the pod off its node, place its replacement, and put everything
	// back: the answer commits nothing (the replacement is counted when it
	// is created and bound).
	cur, in := st.at[pod.UID]
	if in {
		if err := run.fit.remove(cur.pod, cur.node); err != nil {
			r.st = nil
			return "", "", fmt.Errorf("taking %s/%s off its node in the snapshot: %w", pod.Namespace, pod.Name, err)
		}
	}
	replacement := *pod
	replacement.Spec.NodeName = ""
	var dest, reason string
	var placed *corev1.Pod
	if onDemand {
		c := &consolidation{emptied: map[string]bool{}, onDemand: st.onDemand}
		run.destinations(c)
		run.consolidating = c
		var err error
		dest, reason, placed, err = run.placeOnDemand(ctx, &replacement, pod, run.resource(pod), pod.Spec.NodeName)
		run.consolidating = nil
		if err != nil {
			r.st = nil // built again at the next question
			return "", "", err
		}
	} else {
		dest, reason, placed = run.place(ctx, &replacement, pod, run.resource(pod))
	}
	if placed != nil {
		if err := run.fit.remove(placed, dest); err != nil {
			r.st = nil
			return "", "", err
		}
	}
	if in {
		if err := run.fit.add(cur.pod, cur.node, run.resource(cur.pod)); err != nil {
			r.st = nil
			return "", "", err
		}
	}
	st.changes += 2
	return dest, reason, nil
}

// current brings the snapshot up to date, or builds it.
func (r *Resident) current(ctx context.Context) error {
	if r.st != nil && r.fed && r.st.changes+len(r.pending) <= r.st.limit {
		ok, err := r.apply()
		if err != nil || ok {
			return err
		}
	}
	s, err := r.read(ctx)
	if err != nil {
		return err
	}
	clear(r.pending)
	r.st = nil
	g := groupPods(s)
	run, classes, err := r.p.newRun(ctx, s, g)
	if err != nil {
		return err
	}
	if err := run.fit.materialize(); err != nil {
		return err
	}
	st := &residentState{r: run, at: make(map[types.UID]placedPod, len(s.Pods)), noticed: map[string]bool{}, limit: max(1000, len(s.Pods))}
	for _, n := range s.Nodes {
		if classes[n.Name].Class == classify.OnDemand {
			st.onDemand = append(st.onDemand, n.Name)
		}
		if underNotice(n) {
			st.noticed[n.Name] = true
		}
	}
	slices.Sort(st.onDemand)
	for j, pod := range s.Pods {
		if i := g.nodeOf[j]; i >= 0 && inFitter(pod) {
			st.at[pod.UID] = placedPod{pod, s.Nodes[i].Name}
		}
	}
	r.st = st
	r.stats.Builds++
	return nil
}

// apply applies the pending pod changes to the kept snapshot. It returns
// false when the snapshot must be built again instead.
func (r *Resident) apply() (bool, error) {
	st := r.st
	fit := st.r.fit
	for uid, pod := range r.pending {
		r.stats.Applied++
		if pod != nil && !fit.indexes(pod) {
			return false, nil
		}
		if cur, ok := st.at[uid]; ok {
			if err := fit.remove(cur.pod, cur.node); err != nil {
				return false, nil
			}
			delete(st.at, uid)
			st.changes++
		}
		if pod == nil || !inFitter(pod) || pod.Spec.NodeName == "" || fit.nodeInfo(pod.Spec.NodeName) == nil {
			continue
		}
		if err := fit.add(pod, pod.Spec.NodeName, st.r.resource(pod)); err != nil {
			return false, nil
		}
		st.at[uid] = placedPod{pod, pod.Spec.NodeName}
		st.changes++
	}
	clear(r.pending)
	return true, nil
}

// NodeChangeMatters reports whether an update of a node can change an
// answer: its labels, annotations, spec, capacity, allocatable, the status of
// its conditions or its deletion changed; not the heartbeats of its status.
func NodeChangeMatters(old, node *corev1.Node) bool {
	if !maps.Equal(old.Labels, node.Labels) || !maps.Equal(old.Annotations, node.Annotations) ||
		!old.DeletionTimestamp.Equal(node.DeletionTimestamp) ||
		!equality.Semantic.DeepEqual(old.Spec, node.Spec) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Status.Capacity, node.Status.Capacity) ||
		len(old.Status.Conditions) != len(node.Status.Conditions) {
		return true
	}
	for i, c := range old.Status.Conditions {
		if n := node.Status.Conditions[i]; c.Type != n.Type || c.Status != n.Status {
			return true
		}
	}
	return false
}
