// Package scheduler is the simulator's kube-scheduler: the default profile of
// the kube-scheduler's framework (every PreFilter, Filter, PreScore and Score
// plugin, with the profile's weights), over the kube-scheduler's own cache and
// snapshot, one pod at a time as its scheduling cycle runs them.
//
// It shares no code with the planner, whose predictions the simulator scores:
// where the planner's guess of a pod's node is wrong, the world shows it.
//
// What it takes from the kube-scheduler's schedulePod (pkg/scheduler,
// schedule_one.go) and does the same way:
//   - the nodes are the cache's, in its zone-interleaved order; the search
//     starts where the last one stopped and ends once it found as many
//     feasible nodes as the adaptive percentageOfNodesToScore asks (every
//     node below 100 nodes; 50 % less 1 % per 125 nodes above, at least 100
//     nodes and 5 %);
//   - a single feasible node is taken without scoring;
//   - the node with the highest total score wins, equal totals ordered as
//     the scheduler's heap orders them;
//   - no opportunistic batching: the default profile's default topology
//     spread constraints make every pod unsignable (PodTopologySpread's
//     SignPod), so the scheduler never batches them either.
//
// What it leaves out: the DynamicResources plugin (no simulated pod claims a
// device), preemption (the simulator's pods share one priority),
// nominated nodes, extenders, the scheduling queue's backoff (the world calls
// it with its pending pods, oldest first, each step) and binding, which the
// world does.
package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// The adaptive percentageOfNodesToScore of the kube-scheduler
// (schedule_one.go: minFeasibleNodesToFind, minFeasibleNodesPercentageToFind).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

var (
	registry    = sync.OnceValue(plugins.NewInTreeRegistry)
	initMetrics sync.Once
)

// Scheduler places pods as the kube-scheduler's default profile does. It is
// not safe for concurrent use.
type Scheduler struct {
	cache   internalcache.Cache
	snap    *internalcache.Snapshot
	fw      framework.Framework
	factory informers.SharedInformerFactory
	logger  klog.Logger
	// nodes and pods are the objects the cache holds, by name and by UID.
	nodes map[string]*corev1.Node
	pods  map[types.UID]*corev1.Pod
	seen  map[types.UID]bool
	// next is where the next search for feasible nodes starts
	// (nextStartNodeIndex).
	next int
}

// New builds the default profile's framework over an empty cache. The
// framework's goroutines end with ctx.
func New(ctx context.Context) (*Scheduler, error) {
	initMetrics.Do(schedmetrics.InitMetrics)
	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("the kube-scheduler's default configuration: %w", err)
	}
	logger := klog.FromContext(ctx)
	s := &Scheduler{
		cache:   internalcache.New(ctx, nil, false, false),
		snap:    internalcache.NewEmptySnapshot(),
		factory: informers.NewSharedInformerFactory(nil, 0),
		logger:  logger,
		nodes:   map[string]*corev1.Node{},
		pods:    map[types.UID]*corev1.Pod{},
		seen:    map[types.UID]bool{},
	}
	profile := cfg.Profiles[0]
	// DynamicResources is left out: it needs the device informers and their
	// trackers, and skips every pod without a resource claim, which the
	// simulator's pods never have.
	profile.Plugins = profile.Plugins.DeepCopy()
	profile.Plugins.MultiPoint.Enabled = slices.DeleteFunc(profile.Plugins.MultiPoint.Enabled, func(p config.Plugin) bool {
		return p.Name == names.DynamicResources
	})
	s.fw, err = frameworkruntime.NewFramework(ctx, registry(), &profile,
		frameworkruntime.WithInformerFactory(s.factory),
		frameworkruntime.WithSnapshotSharedLister(s.snap),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(s.factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithLogger(logger),
		frameworkruntime.WithParallelism(1),
	)
	if err != nil {
		return nil, fmt.Errorf("building the kube-scheduler's default profile: %w", err)
	}
	return s, nil
}

// Inform gives the plugins an object they read through informers: a
// Namespace (for affinity terms' namespace selectors), or a pod's controller,
// a ReplicaSet or StatefulSet, whose selector brings the default topology
// spread constraints to its pods.
func (s *Scheduler) Inform(obj any) error {
	switch obj.(type) {
	case *corev1.Namespace:
		return s.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(obj)
	case *appsv1.ReplicaSet:
		return s.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(obj)
	case *appsv1.StatefulSet:
		return s.factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(obj)
	}
	return fmt.Errorf("the scheduler is not informed of %T", obj)
}

// Sync makes the cache hold these nodes and these pods bound to them, as the
// scheduler's informers would: objects are compared by pointer, so an object
// changed in place is not seen (the world replaces objects, as the API does).
func (s *Scheduler) Sync(nodes []*corev1.Node, pods []*corev1.Pod) error {
	names := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		names[n.Name] = true
		switch old := s.nodes[n.Name]; {
		case old == nil:
			s.cache.AddNode(s.logger, n)
		case old != n:
			s.cache.UpdateNode(s.logger, old, n)
		}
		s.nodes[n.Name] = n
	}
	clear(s.seen)
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s/%s is not bound", p.Namespace, p.Name)
		}
		s.seen[p.UID] = true
		switch old := s.pods[p.UID]; {
		case old == nil:
			if err := s.cache.AddPod(s.logger, p); err != nil {
				return err
			}
		case old.Spec.NodeName != p.Spec.NodeName:
			// A pod assumed on another node than it is bound to (a
			// simulation's placement): the cache refuses to move it by an
			// update.
			if err := s.cache.RemovePod(s.logger, old); err != nil {
				return err
			}
			if err := s.cache.AddPod(s.logger, p); err != nil {
				return err
			}
		case old != p:
			if err := s.cache.UpdatePod(s.logger, old, p); err != nil {
				return err
			}
		}
		s.pods[p.UID] = p
	}
	for uid, p := range s.pods {
		if !s.seen[uid] {
			if err := s.cache.RemovePod(s.logger, p); err != nil {
				return err
			}
			delete(s.pods, uid)
		}
	}
	for name, n := range s.nodes {
		if !names[name] {
			if err := s.cache.RemoveNode(s.logger, n); err != nil {
				return err
			}
			delete(s.nodes, name)
		}
	}
	return nil
}

// Schedule runs one scheduling cycle for pod (not bound) and returns the
// chosen node's name, or "" and the reason when no node fits. The pod is then
// in the cache on that node, as an assumed pod is, until the next Sync
// replaces it by the bound object of the same UID (or removes it).
func (s *Scheduler) Schedule(ctx context.Context, pod *corev1.Pod) (string, string, error) {
	state, all, nodes, reason, err := s.prefilter(ctx, pod)
	if err != nil || reason != "" {
		return "", reason, err
	}
	want := s.feasibleToFind(len(all))
	var feasible []fwk.NodeInfo
	processed, rejected := 0, ""
	for i := range nodes {
		ni := nodes[(s.next+i)%len(nodes)]
		processed++
		st := s.fw.RunFilterPlugins(ctx, state, pod, ni)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
		case !st.IsRejected():
			return "", "", st.AsError()
		case rejected == "":
			rejected = st.Message()
		}
		if len(feasible) >= want {
			break
		}
	}
	if len(nodes) > 0 {
		s.next = (s.next + processed) % len(all)
	}
	var host string
	switch len(feasible) {
	case 0:
		return "", fmt.Sprintf("0/%d nodes are available: %s", len(all), rejected), nil
	case 1:
		host = feasible[0].Node().Name
	default:
		if st := s.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
			return "", "", st.AsError()
		}
		scores, st := s.fw.RunScorePlugins(ctx, state, pod, feasible)
		if !st.IsSuccess() {
			return "", "", st.AsError()
		}
		host = framework.NewSortedScoredNodes(scores).Pop().Name
	}
	return host, "", s.assume(pod, host)
}

// assume puts pod on host in the cache, as the scheduler assumes a pod it
// sends to be bound.
func (s *Scheduler) assume(pod *corev1.Pod, host string) error {
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = host
	if err := s.cache.AddPod(s.logger, assumed); err != nil {
		return err
	}
	s.pods[assumed.UID] = assumed
	return nil
}

// Feasible lists the nodes whose filter plugins accept pod (not bound), all
// of them, without placing it.
func (s *Scheduler) Feasible(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	state, _, nodes, _, err := s.prefilter(ctx, pod)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ni := range nodes {
		st := s.fw.RunFilterPlugins(ctx, state, pod, ni)
		if !st.IsSuccess() && !st.IsRejected() {
			return nil, st.AsError()
		}
		if st.IsSuccess() {
			out = append(out, ni.Node().Name)
		}
	}
	return out, nil
}

// prefilter starts a scheduling cycle for pod: the snapshot brought up to
// date, the PreFilter plugins run, and the snapshot's nodes, all of them and
// those PreFilter leaves, in the cache's order. When there are no nodes, or
// PreFilter rejects the pod, reason says why and no node is left.
func (s *Scheduler) prefilter(ctx context.Context, pod *corev1.Pod) (state fwk.CycleState, all, nodes []fwk.NodeInfo, reason string, err error) {
	if err := s.cache.UpdateSnapshot(s.logger, s.snap); err != nil {
		return nil, nil, nil, "", err
	}
	all, err = s.snap.NodeInfos().List()
	if err != nil {
		return nil, nil, nil, "", err
	}
	if len(all) == 0 {
		return nil, nil, nil, "no nodes available to schedule pods", nil
	}
	state = framework.NewCycleState()
	pre, status, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, nil, nil, "", status.AsError()
		}
		return nil, nil, nil, status.Message(), nil
	}
	nodes = all
	if !pre.AllNodes() {
		nodes = nil
		for _, ni := range all {
			if pre.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
			}
		}
	}
	return state, all, nodes, "", nil
}

// feasibleToFind is numFeasibleNodesToFind with the default
// percentageOfNodesToScore (0: adaptive).
func (s *Scheduler) feasibleToFind(all int) int {
	if all < minFeasibleNodesToFind {
		return all
	}
	percentage := max(50-all/125, minFeasibleNodesPercentageToFind)
	return max(all*percentage/100, minFeasibleNodesToFind)
}
