package plan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"spotter.dev/spotter/internal/snapshot"
)

// Engine answers many scheduling questions about one changing cluster with the
// planner's fit check (the kube-scheduler's PreFilter and Filter plugins,
// FilterPlugins, default profile arguments). The simulator asks it thousands of
// times per simulated week, so it keeps what does not change between questions:
// the scheduler frameworks are built once, over the cluster-wide objects of the
// snapshot it starts from (namespaces, services, workload controllers, volumes,
// storage classes), and each pod's computed requests are reused for as long as
// the caller passes the same pod object. Each call still builds the scheduler's
// node snapshot from the nodes and pods it is given, so answers never depend on
// earlier calls.
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
	fit, err := newFitter(ctx, &base, groupPods(&base).nodeOf, func(string) bool { return true })
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
	if err := e.reset(req.Nodes, req.Pods, req.Pending); err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("adding %s/%s to the snapshot: %w", pod.Namespace, pod.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// reset gives the frameworks a fresh scheduler snapshot of nodes and pods,
// and keeps the PodInfos of pods and pending.
func (e *Engine) reset(nodes []*corev1.Node, pods, pending []*corev1.Pod) error {
	snap := cache.NewSnapshot(nil, nodes)
	if err := snap.StartMutations(); err != nil {
		return err
	}
	known := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		known[n.Name] = n
	}
	e.calls++
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
	}
	for _, p := range pending {
		e.info(p)
	}
	e.prune()
	return e.fit.reset(snap, bound, boundTo)
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
		pi = &engineInfo{sizedPodInfo: newSizedPodInfo(pod)}
		e.infos[pod] = pi
	}
	pi.call = e.calls
	return pi.sizedPodInfo
}

// newSizedPodInfo returns the scheduler's PodInfo of pod with its requests
// computed.
func newSizedPodInfo(pod *corev1.Pod) *sizedPodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		// NewPodInfo fails only on invalid affinity selectors; the pod then
		// counts with its resources and without its affinity terms.
		pi = &framework.PodInfo{Pod: pod}
	}
	return &sizedPodInfo{PodInfo: *pi, res: pi.CalculateResource()}
}
