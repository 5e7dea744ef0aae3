package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"spotter.dev/spotter/internal/snapshot"
)

// Engine answers many scheduling questions about one changing cluster with the
// planner's fit check (the kube-scheduler's PreFilter and Filter plugins,
// FilterPlugins, default profile arguments). The simulator asks it thousands of
// times per simulated week, so it keeps what does not change between questions:
// the scheduler frameworks are built once, over the cluster-wide objects of the
// snapshot it starts from (namespaces, services, workload controllers, volumes,
// storage classes), each pod's PodInfo is reused for as long as the caller
// passes the same pod object, and requests are computed once per shape of
// requests (resourceMemo). It also keeps the scheduler's snapshot
// of the nodes and pods of the last call and brings it to the next call
// instead of building it again (see update): it takes back the last call's
// placements, removes the nodes that are gone and adds the new ones, sets the
// node objects that changed and applies the pods that differ (by object), as
// a removal and an addition. Answers never depend on earlier calls: a kept
// snapshot holds what a new one would (TestEngineKeptAnswersAsNew).
//
// An Engine is not safe for concurrent use.
type Engine struct {
	fit *fitter
	// infos caches PodInfos with their requests computed (the scheduler's
	// PodInfo computes them again on every CalculateResource) by pod object.
	// Callers ask about different subsets of their pods from one call to
	// the next, so an entry stays for some calls after its last use (see
	// prune).
	infos map[*corev1.Pod]*engineInfo
	// calls counts the Schedule calls.
	calls uint64
	// kept is what the scheduler snapshot holds, so that the next call
	// brings it up to date instead of building it again; nil after an
	// error.
	kept *keptSnapshot
}

// keptSnapshot is the state of an Engine's scheduler snapshot between calls.
type keptSnapshot struct {
	// nodes are the nodes it was built with.
	nodes []*corev1.Node
	// at are the pods of ScheduleRequest.Pods it holds, with their nodes.
	at map[*corev1.Pod]string
	// placed are the placements the last call committed, taken back at the
	// start of the next.
	placed []placedPod
	// changes counts the pods added and removed since it was built; past
	// limit it is built again, so that the fitter's log of changes stays
	// short.
	changes, limit int
}

type engineInfo struct {
	*sizedPodInfo
	// call is the last call that used it.
	call uint64
}

// NewEngine builds the frameworks over the cluster-wide objects of static. Its
// nodes and pods are not used: each Schedule call names its own. The objects
// the plugins read from listers (namespaces, volumes, CSINodes) stay those of
// static for the engine's life.
func NewEngine(ctx context.Context, static *snapshot.Snapshot) (*Engine, error) {
	base := *static
	base.Pods = nil
	fit, err := newFitter(ctx, &base, groupPods(&base).nodeOf, func(string) bool { return true }, nil, nil)
	if err != nil {
		return nil, err
	}
	return &Engine{fit: fit, infos: map[*corev1.Pod]*engineInfo{}}, nil
}

// ScheduleRequest is one scheduling question.
type ScheduleRequest struct {
	// Nodes are the cluster's nodes, including any hypothetical ones (an
	// autoscaler's node templates).
	Nodes []*corev1.Node
	// Pods are the pods bound to Nodes (spec.nodeName set). Pods bound to other
	// nodes, and terminal pods, are left out.
	Pods []*corev1.Pod
	// Pending are the pods to place, in this order; their spec.nodeName must be
	// empty. Each placement is committed before the next pod is considered, so
	// later pods see its capacity, affinity and spread.
	Pending []*corev1.Pod
	// Eligible, when set, restricts the destinations: other nodes still count
	// for affinity and spread but never receive a pod.
	Eligible func(node *corev1.Node) bool
	// Pick chooses among the nodes the filter plugins accept for a pod (never
	// empty, in the order of Nodes) and returns the index of the chosen one.
	// Nil picks the first: first fit.
	Pick func(pod *corev1.Pod, feasible []fwk.NodeInfo) int
}

// Placement is where Schedule put one pending pod.
type Placement struct {
	Pod *corev1.Pod
	// Node is the chosen node, or "" when no eligible node fits.
	Node string
	// Reason says why no node fits, as the scheduler would:
	// "0/5 nodes fit: 3 NodeResourcesFit: Insufficient cpu, ...".
	Reason string
}

// Schedule places req.Pending one by one on the eligible nodes that pass the
// filter plugins, choosing with req.Pick, and returns one Placement per
// pending pod, in order. The objects of req are not modified.
func (e *Engine) Schedule(ctx context.Context, req ScheduleRequest) ([]Placement, error) {
	e.calls++
	if !e.update(req.Nodes, req.Pods) {
		if err := e.reset(req.Nodes, req.Pods); err != nil {
			e.kept = nil
			return nil, err
		}
	}
	for _, p := range req.Pending {
		e.info(p)
	}
	e.prune()
	var eligible []fwk.NodeInfo
	for _, n := range req.Nodes {
		if req.Eligible != nil && !req.Eligible(n) {
			continue
		}
		if ni := e.fit.nodeInfo(n.Name); ni != nil {
			eligible = append(eligible, ni)
		}
	}
	out := make([]Placement, 0, len(req.Pending))
	feasible := make([]fwk.NodeInfo, 0, len(eligible))
	for _, pod := range req.Pending {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if pod.Spec.NodeName != "" {
			return nil, fmt.Errorf("pending pod %s/%s is bound to %s already", pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		p := Placement{Pod: pod}
		feasible = feasible[:0]
		rejected := map[string]int{}
		cyc, status := e.fit.prepare(ctx, pod)
		if status != nil {
			p.Reason = describe(status)
			out = append(out, p)
			continue
		}
		res := e.info(pod).res
		cpu, mem := res.Resource.GetMilliCPU(), res.Resource.GetMemory()
		for _, ni := range eligible {
			if cyc.only != nil {
				if _, ok := cyc.only[ni.Node().Name]; !ok {
					rejected["NodeAffinity: node(s) didn't match Pod's node affinity/selector"]++
					continue
				}
			}
			// NodeResourcesFit's arithmetic first, to skip the plugins where
			// they would reject.
			n := roomOf(ni)
			if reason := n.fits(cpu, mem); reason != "" {
				rejected[reason]++
				continue
			}
			if s := e.fit.filter(ctx, cyc, pod, ni); !s.IsSuccess() {
				rejected[describe(s)]++
				continue
			}
			feasible = append(feasible, ni)
		}
		if len(feasible) == 0 {
			p.Reason = summarize(rejected, len(eligible), "nodes")
			out = append(out, p)
			continue
		}
		i := 0
		if req.Pick != nil {
			i = req.Pick(pod, feasible)
		}
		p.Node = feasible[i].Node().Name
		placed := *pod
		placed.Spec.NodeName = p.Node
		if err := e.fit.add(&placed, p.Node, res); err != nil {
			e.kept = nil
			return nil, fmt.Errorf("adding %s/%s to the snapshot: %w", pod.Namespace, pod.Name, err)
		}
		e.kept.placed = append(e.kept.placed, placedPod{&placed, p.Node})
		out = append(out, p)
	}
	return out, nil
}

// reset gives the frameworks a fresh scheduler snapshot of nodes and pods.
func (e *Engine) reset(nodes []*corev1.Node, pods []*corev1.Pod) error {
	snap := newNodeSet(nodes)
	known := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		known[n.Name] = n
	}
	kept := &keptSnapshot{nodes: slices.Clone(nodes), at: make(map[*corev1.Pod]string, len(pods)), limit: max(1000, len(pods))}
	var bound []fwk.PodInfo
	var boundTo []*corev1.Node
	for _, p := range pods {
		node := known[p.Spec.NodeName]
		if node == nil || terminal(p) {
			continue
		}
		pi := e.info(p)
		if err := snap.AddPod(pi, p.Spec.NodeName); err != nil {
			return err
		}
		bound = append(bound, pi)
		boundTo = append(boundTo, node)
		kept.at[p] = p.Spec.NodeName
	}
	if err := e.fit.reset(snap, bound, boundTo); err != nil {
		return err
	}
	e.kept = kept
	return nil
}

// update brings the kept snapshot to nodes and pods: it takes back the last
// call's placements, removes the nodes that are gone (their pods first) and
// adds the new ones, sets the node objects that changed, removes the pods
// that are no longer in pods and adds the new ones: the same fitter
// operations a plan commits with. A node whose labels or allocatable changed
// is removed and added again (the pod index and the resource accounting read
// them). It returns false when the snapshot must be built again instead: a
// pod without a UID or two with one, a pod whose selectors name a label key
// the pod index lacks, two nodes with one name, or too many changes since the
// last build.
func (e *Engine) update(nodes []*corev1.Node, pods []*corev1.Pod) bool {
	k := e.kept
	if k == nil {
		return false
	}
	e.kept = nil // until it is whole again
	// A placement and its removal are two changes in the fitter's log.
	k.changes += 2 * len(k.placed)
	for _, p := range k.placed {
		if e.fit.remove(p.pod, p.node) != nil {
			return false
		}
	}
	k.placed = k.placed[:0]
	if !e.updateNodes(k, nodes) {
		return false
	}
	uids := make(map[types.UID]struct{}, len(pods))
	seen := make(map[*corev1.Pod]struct{}, len(k.at))
	var added []*corev1.Pod
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" || terminal(p) || e.fit.nodeInfo(node) == nil {
			continue
		}
		if _, dup := uids[p.UID]; dup || p.UID == "" {
			return false
		}
		uids[p.UID] = struct{}{}
		e.info(p)
		if at, ok := k.at[p]; ok && at == node {
			seen[p] = struct{}{}
			continue
		}
		if !e.fit.indexes(p) {
			return false
		}
		added = append(added, p)
	}
	if k.changes += len(k.at) - len(seen) + len(added); k.changes > k.limit {
		return false
	}
	// Removals first: a pod's new object has the UID of its old one.
	for p, node := range k.at {
		if _, ok := seen[p]; ok {
			continue
		}
		if e.fit.remove(p, node) != nil {
			return false
		}
		delete(k.at, p)
	}
	for _, p := range added {
		if e.fit.add(p, p.Spec.NodeName, e.info(p).res) != nil {
			return false
		}
		k.at[p] = p.Spec.NodeName
	}
	e.kept = k
	return true
}

// updateNodes brings the kept snapshot's nodes to nodes (see update).
func (e *Engine) updateNodes(k *keptSnapshot, nodes []*corev1.Node) bool {
	now := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		if _, dup := now[n.Name]; dup {
			return false
		}
		now[n.Name] = n
	}
	was := make(map[string]*corev1.Node, len(k.nodes))
	leaving := map[string]bool{}
	var renewed []*corev1.Node
	for _, o := range k.nodes {
		if _, dup := was[o.Name]; dup {
			return false // the snapshot holds the later of the two
		}
		was[o.Name] = o
		switch n := now[o.Name]; {
		case n == o:
		case n == nil || !maps.Equal(n.Labels, o.Labels) || !equality.Semantic.DeepEqual(n.Status.Allocatable, o.Status.Allocatable):
			leaving[o.Name] = true
		default:
			// Taints, unschedulable, annotations, conditions: what the pod
			// index and the resource accounting do not read.
			renewed = append(renewed, n)
		}
	}
	if len(leaving) == 0 && len(renewed) == 0 && len(nodes) == len(k.nodes) {
		return true
	}
	for p, node := range k.at {
		if !leaving[node] {
			continue
		}
		if e.fit.remove(p, node) != nil {
			return false
		}
		delete(k.at, p)
		k.changes++
	}
	for name := range leaving {
		if e.fit.snap.removeNode(name) != nil {
			return false
		}
	}
	for _, n := range nodes {
		if _, ok := was[n.Name]; !ok || leaving[n.Name] {
			if e.fit.snap.addNode(n) != nil {
				return false
			}
		}
	}
	for _, n := range renewed {
		ni := e.fit.nodeInfo(n.Name)
		if ni == nil {
			return false
		}
		ni.SetNode(n)
	}
	k.nodes = append(k.nodes[:0], nodes...)
	e.fit.views.nodesChanged()
	return true
}

// prune drops, every pruneEvery calls, the entries no call used in the last
// pruneEvery: each holds its pod.
func (e *Engine) prune() {
	if e.calls%pruneEvery != 0 {
		return
	}
	for p, pi := range e.infos {
		if pi.call+pruneEvery <= e.calls {
			delete(e.infos, p)
		}
	}
}

const pruneEvery = 16

// info returns the cached PodInfo of pod, creating it on first use.
func (e *Engine) info(pod *corev1.Pod) *sizedPodInfo {
	pi, ok := e.infos[pod]
	if !ok {
		pi = &engineInfo{sizedPodInfo: e.newSizedPodInfo(pod)}
		e.infos[pod] = pi
	}
	pi.call = e.calls
	return pi.sizedPodInfo
}

// newSizedPodInfo returns the scheduler's PodInfo of pod with its requests,
// computed once per shape of requests (resourceMemo): each change of a pod
// is a new object.
func (e *Engine) newSizedPodInfo(pod *corev1.Pod) *sizedPodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		// NewPodInfo fails only on invalid affinity selectors; the pod then
		// counts with its resources and without its affinity terms.
		pi = &framework.PodInfo{Pod: pod}
	}
	return &sizedPodInfo{PodInfo: *pi, res: e.fit.resources.get(pod)}
}
