package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"spotter.dev/spotter/internal/snapshot"
)

// FilterPlugins are the kube-scheduler Filter plugins the fit check runs, with
// the default profile's arguments: a pod fits a node in the plan exactly when
// the scheduler's filters would let it.
var FilterPlugins = []string{
	names.NodeUnschedulable,
	names.NodeName,
	names.TaintToleration,
	names.NodeAffinity,
	names.NodePorts,
	names.NodeResourcesFit,
	names.VolumeRestrictions,
	names.VolumeZone,
	names.NodeVolumeLimits,
	names.VolumeBinding,
	names.InterPodAffinity,
	names.PodTopologySpread,
}

// constraintPlugins are the Filter plugins that say where a pod may run, as
// opposed to whether a node has room for it: every one of FilterPlugins but
// NodeResourcesFit, NodePorts, VolumeRestrictions and NodeVolumeLimits. A
// node they reject would not take the pod however empty it were.
var constraintPlugins = slices.DeleteFunc(slices.Clone(FilterPlugins), func(n string) bool {
	return n == names.NodeResourcesFit || n == names.NodePorts || n == names.VolumeRestrictions || n == names.NodeVolumeLimits
})

// fitter runs the scheduler framework's PreFilter and Filter plugins against a
// scheduler snapshot that the plan mutates as it commits placements.
//
// It holds four frameworks over the same snapshot: full, with every plugin of
// FilterPlugins; lean, without InterPodAffinity and PodTopologySpread, whose
// PreFilter scans every pod of the cluster; static, with the plugins whose
// answer depends on the pod and the Node object only (see staticPlugins); and
// constraints, whose Filter runs on the PreFilter state of full (see
// constraintPlugins and admits). A pod
// goes through lean only when the two expensive plugins would skip it anyway
// (see needsFull): it has no required pod (anti-)affinity and no DoNotSchedule
// spread constraint, and no existing pod's required anti-affinity term matches
// it.
//
// Every change to the snapshot is logged (see mutation), so that a PreFilter
// state computed for one pod of a workload can be reused for the next one and
// brought up to date with the plugins' own AddPod and RemovePod extensions
// instead of being computed again from every pod (see cycleFor).
type fitter struct {
	full, lean, static framework.Framework
	// constraints is built by buildConstraints when first needed (admits).
	constraints      framework.Framework
	buildConstraints func() (framework.Framework, error)
	snap             *nodeSet
	views            *viewLister
	anti             *antiAffinityIndex
	nsLister         corelisters.NamespaceLister
	logger           klog.Logger
	// resources computes the scheduler's accounting of pods' requests;
	// known holds the bound pods' PodInfos, for the next plan (see
	// knownPods).
	resources *resourceMemo
	known     knownPods
	// built holds the destination nodes' NodeInfos as built, for the next
	// plan (see builtNodes).
	built builtNodes

	// log holds every change made to the snapshot since it was built; byNS
	// indexes it by the pod's namespace, and cross lists the changes of pods
	// whose required anti-affinity may match pods of other namespaces.
	log   []mutation
	byNS  map[string][]int
	cross []int

	// exhaustive turns the shortcuts off (see Planner.exhaustive).
	exhaustive bool

	// deferred holds, by node, the pods of nodes that are never destinations
	// and that are not in the snapshot yet: only the PreFilter of
	// InterPodAffinity and PodTopologySpread over the whole snapshot reads
	// them (views read the bound pods), so they are added when one first
	// runs (materialize). Pods with volume claims are never deferred
	// (VolumeRestrictions counts their users in the snapshot).
	deferred map[string][]fwk.PodInfo
	// requested is the scheduler's accounting of the requests of each node's
	// pods, as the snapshot was built.
	requested map[string]podSize
	// onChange, when set, is called after a pod is added to or removed from a
	// node.
	onChange func(node string)
	// nsLabels caches the labels of namespaces (see namespaceLabels).
	nsLabels map[string]labels.Set
	// resOf is the accounting of the requests of the pods the fitter was
	// built with, by their index (zero for pods not bound).
	resOf []fwk.PodResource
	// keys are the label keys the pods' selectors name: the pod index
	// (views) indexes pods by them.
	keys map[string]bool
}

// inFitter reports whether a pod bound to a node of the snapshot takes its
// room there: every pod but those that ended.
func inFitter(p *corev1.Pod) bool { return !terminal(p) }

// indexes reports whether every label key pod's selectors name is indexed,
// so that the pod can be added to the snapshot.
func (f *fitter) indexes(pod *corev1.Pod) bool {
	keys := map[string]bool{}
	selectedKeys(pod, keys)
	for k := range keys {
		if !f.keys[k] {
			return false
		}
	}
	return true
}

// namespaceLabels returns the labels of a namespace as InterPodAffinity reads
// them, once per namespace: the namespaces do not change during a plan.
func (f *fitter) namespaceLabels(ns string) labels.Set {
	if l, ok := f.nsLabels[ns]; ok {
		return l
	}
	l := interpodaffinity.GetNamespaceLabelsSnapshot(f.logger, ns, f.nsLister)
	f.nsLabels[ns] = l
	return l
}

// mutation is one pod added to (delta 1) or removed from (-1) a node.
type mutation struct {
	pod   fwk.PodInfo
	node  fwk.NodeInfo
	delta int
}

// defaultConfig is the kube-scheduler's default configuration, computed once
// rather than for every plan (50 µs each time). Frameworks only read it: each
// build copies the profile and its plugin set.
var defaultConfig = sync.OnceValues(latest.Default)

// initMetrics creates the scheduler's metric objects, which the framework
// updates; they are not registered with any registry Spotter serves.
var initMetrics sync.Once

// newFitter builds the scheduler framework over the objects of s. The pods of
// nodes for which destination returns false are deferred (see
// fitter.deferred). Pods bound to nodes that are not in s are left out, as the
// plugins skip NodeInfos without a node.
func newFitter(ctx context.Context, s *snapshot.Snapshot, nodeOf []int32, destination func(node string) bool, known knownPods, built builtNodes) (*fitter, error) {
	initMetrics.Do(schedmetrics.InitMetrics)
	logger := klog.FromContext(ctx)
	factory, err := informerFactory(s)
	if err != nil {
		return nil, err
	}
	cfg, err := defaultConfig()
	if err != nil {
		return nil, fmt.Errorf("default scheduler configuration: %w", err)
	}
	f := &fitter{views: &viewLister{}, resources: newResourceMemo(), nsLabels: map[string]labels.Set{}, nsLister: factory.Core().V1().Namespaces().Lister(), logger: logger}
	// A framework starts a goroutine (its metrics recorder, flushing every
	// second) that runs until the context it was built with ends: with the
	// caller's context, a controller that plans every minute gathered
	// thousands of them. The filter plugins used here need nothing of that
	// context once built: it ends when the frameworks are.
	fwCtx, stop := context.WithCancel(ctx)
	defer stop()
	build := func(fwCtx context.Context, plugins ...string) (framework.Framework, error) {
		profile := cfg.Profiles[0]
		profile.Plugins = only(profile.Plugins, plugins)
		fw, err := frameworkruntime.NewFramework(fwCtx, inTreeRegistry, &profile,
			frameworkruntime.WithInformerFactory(factory),
			frameworkruntime.WithSnapshotSharedLister(f.views),
			frameworkruntime.WithLogger(logger),
			// NodeVolumeLimits counts CSI volumes through it; without it its
			// Filter dereferences nil for any pod with a claim.
			frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
			// The plugins' PreFilter runs over small views (see viewLister);
			// goroutines per call cost more than they save there.
			frameworkruntime.WithParallelism(1),
		)
		if err != nil {
			return nil, fmt.Errorf("building the scheduler framework: %w", err)
		}
		return fw, nil
	}
	if f.full, err = build(fwCtx, FilterPlugins...); err != nil {
		return nil, err
	}
	lean := slices.DeleteFunc(slices.Clone(FilterPlugins), func(n string) bool {
		return n == names.InterPodAffinity || n == names.PodTopologySpread
	})
	if f.lean, err = build(fwCtx, lean...); err != nil {
		return nil, err
	}
	if f.static, err = build(fwCtx, staticPlugins...); err != nil {
		return nil, err
	}
	// Few plans need the constraints framework (consolidations of pods with
	// constraints on other pods): it is built on first use, in a context of
	// its own that ends once it is built.
	f.buildConstraints = func() (framework.Framework, error) {
		bctx, stop := context.WithCancel(ctx)
		defer stop()
		return build(bctx, constraintPlugins...)
	}

	f.resOf = make([]fwk.PodResource, len(s.Pods))
	f.known = make(knownPods, len(s.Pods))
	dest := make([]bool, len(s.Nodes))
	for i, node := range s.Nodes {
		dest[i] = destination(node.Name)
	}
	sizes := make([]podSize, len(s.Nodes))
	deferred := map[string][]fwk.PodInfo{}
	// Each pod's PodInfo (its affinity terms parsed) and requests, half of
	// them on the other core.
	infos := make([]*sizedPodInfo, len(s.Pods))
	prepare := func(lo, hi int, memo *resourceMemo, pis *podInfoMemo, keys map[string]bool) {
		for j := lo; j < hi; j++ {
			if p := s.Pods[j]; nodeOf[j] >= 0 && inFitter(p) {
				info := known[p]
				if info == nil {
					info = &sizedPodInfo{res: memo.get(p)}
					pis.fill(&info.PodInfo, p)
				}
				infos[j] = info
				selectedKeys(p, keys)
			}
		}
	}
	half := len(s.Pods) / 2
	done := make(chan struct{})
	keys, otherKeys := map[string]bool{}, map[string]bool{}
	go func() {
		prepare(half, len(s.Pods), newResourceMemo(), newPodInfoMemo(), otherKeys)
		close(done)
	}()
	prepare(0, half, f.resources, newPodInfoMemo(), keys)
	<-done
	maps.Copy(keys, otherKeys)
	// The anti-affinity index on the other core, while the snapshot is
	// filled.
	indexed := make(chan struct{})
	var anti *antiAffinityIndex
	pods := newPodIndex(keys, len(s.Pods))
	go func() {
		anti = newAntiAffinityIndex(nil)
		for j, info := range infos {
			if info != nil {
				anti.add(info, 1)
				pods.add(info, s.Nodes[nodeOf[j]])
			}
		}
		close(indexed)
	}()
	// The destination nodes' pods, then their NodeInfos (copied from the
	// last plan's where nothing changed); the pods with volume claims of
	// other nodes are added to the snapshot, the others deferred.
	onDest := make([][]*sizedPodInfo, len(s.Nodes))
	var claimed []int
	for j, p := range s.Pods {
		info := infos[j]
		if info == nil {
			continue
		}
		i := nodeOf[j]
		f.resOf[j] = info.res
		f.known[p] = info
		sizes[i].cpu += info.res.Resource.GetMilliCPU()
		sizes[i].mem += info.res.Resource.GetMemory()
		switch {
		case dest[i]:
			onDest[i] = append(onDest[i], info)
		case hasClaims(p):
			claimed = append(claimed, j)
		default:
			name := s.Nodes[i].Name
			deferred[name] = append(deferred[name], info)
		}
	}
	f.built = make(builtNodes, len(built))
	nis := make([]*framework.NodeInfo, len(s.Nodes))
	for i, node := range s.Nodes {
		if dest[i] {
			nis[i] = built.nodeInfo(node, onDest[i], f.built)
			continue
		}
		nis[i] = framework.NewNodeInfo()
		nis[i].SetNode(node)
	}
	snap := nodeSetOf(nis)
	for _, j := range claimed {
		if err := snap.AddPod(infos[j], s.Nodes[nodeOf[j]].Name); err != nil {
			<-indexed
			return nil, err
		}
	}
	f.requested = make(map[string]podSize, len(s.Nodes))
	for i, node := range s.Nodes {
		f.requested[node.Name] = sizes[i]
	}
	<-indexed
	f.install(snap, pods, anti)
	f.deferred, f.keys = deferred, keys
	return f, nil
}

// materialize adds the deferred pods to the snapshot (see fitter.deferred).
func (f *fitter) materialize() error {
	for node, pods := range f.deferred {
		for _, pi := range pods {
			if err := f.snap.AddPod(pi, node); err != nil {
				return err
			}
		}
	}
	f.deferred = nil
	return nil
}

// materializeNode adds node's deferred pods to the snapshot (see
// fitter.deferred): a Filter plugin is about to run on node.
func (f *fitter) materializeNode(node string) error {
	pods, ok := f.deferred[node]
	if !ok {
		return nil
	}
	for i, pi := range pods {
		if err := f.snap.AddPod(pi, node); err != nil {
			f.deferred[node] = pods[i:] // the pods added stay added
			return err
		}
	}
	delete(f.deferred, node)
	return nil
}

// room is the room of ni's node, its deferred pods counted.
func (f *fitter) room(ni fwk.NodeInfo) room {
	n := roomOf(ni)
	for _, pi := range f.deferred[ni.Node().Name] {
		res := pi.CalculateResource().Resource
		n.usedCPU += res.GetMilliCPU()
		n.usedMem += res.GetMemory()
		n.pods++
	}
	return n
}

// reset points the fitter at a new snapshot holding the pods bound (each to
// the node of the same index in nodes): it drops the views, the mutation log
// and the anti-affinity index of the previous one.
func (f *fitter) reset(snap *nodeSet, bound []fwk.PodInfo, nodes []*corev1.Node) error {
	keys := map[string]bool{}
	for _, pi := range bound {
		selectedKeys(pi.GetPod(), keys)
	}
	pods := newPodIndex(keys, len(bound))
	for i, pi := range bound {
		pods.add(pi, nodes[i])
	}
	f.install(snap, pods, newAntiAffinityIndex(bound))
	f.keys = keys
	f.requested = nil
	return nil
}

// install points the fitter at snap, whose pods are indexed in pods and
// anti, with no change logged and no pod deferred.
func (f *fitter) install(snap *nodeSet, pods *podIndex, anti *antiAffinityIndex) {
	f.snap, f.anti, f.deferred = snap, anti, nil
	f.views.reset(snap, pods)
	f.log, f.byNS, f.cross = nil, map[string][]int{}, nil
}

// inTreeRegistry holds the scheduler's plugin factories; building it reads the
// feature gates, so it is built once.
var inTreeRegistry = plugins.NewInTreeRegistry()

// only keeps the named plugins of a profile (and the queue sort and bind plugins
// a framework must have) and drops scoring, preemption and the rest.
func only(p *schedconfig.Plugins, keep []string) *schedconfig.Plugins {
	out := p.DeepCopy()
	var kept []schedconfig.Plugin
	for _, pl := range p.MultiPoint.Enabled {
		if slices.Contains(keep, pl.Name) || pl.Name == names.PrioritySort || pl.Name == names.DefaultBinder {
			kept = append(kept, pl)
		}
	}
	out.MultiPoint.Enabled = kept
	return out
}

// informerFactory returns an informer factory whose caches hold the objects of
// s. It is never started: the plugins only read its listers.
func informerFactory(s *snapshot.Snapshot) (informers.SharedInformerFactory, error) {
	f := informers.NewSharedInformerFactory(nil, 0)
	type adder struct {
		indexer cacheIndexer
		objs    []any
	}
	var all []adder
	all = append(all,
		// Pods are not added: the filter plugins read them from the snapshot.
		adder{f.Core().V1().Nodes().Informer().GetIndexer(), anySlice(s.Nodes)},
		adder{f.Core().V1().Namespaces().Informer().GetIndexer(), anySlice(s.Namespaces)},
		adder{f.Core().V1().Services().Informer().GetIndexer(), anySlice(s.Services)},
		adder{f.Core().V1().ReplicationControllers().Informer().GetIndexer(), anySlice(s.ReplicationCtrls)},
		adder{f.Apps().V1().ReplicaSets().Informer().GetIndexer(), anySlice(s.ReplicaSets)},
		adder{f.Apps().V1().StatefulSets().Informer().GetIndexer(), anySlice(s.StatefulSets)},
		adder{f.Core().V1().PersistentVolumes().Informer().GetIndexer(), anySlice(s.PVs)},
		adder{f.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(), anySlice(s.PVCs)},
		adder{f.Storage().V1().StorageClasses().Informer().GetIndexer(), anySlice(s.StorageClasses)},
		adder{f.Storage().V1().CSINodes().Informer().GetIndexer(), anySlice(s.CSINodes)},
	)
	for _, a := range all {
		for _, o := range a.objs {
			if err := a.indexer.Add(o); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

type cacheIndexer interface{ Add(obj any) error }

func anySlice[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}

// needsFull reports whether InterPodAffinity or PodTopologySpread could reject
// pod anywhere. When it returns false, both plugins would return Skip from
// PreFilter, so leaving them out changes no answer.
func (f *fitter) needsFull(pod *corev1.Pod) bool {
	if f.exhaustive {
		return true
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	// The default profile's default spread constraints are ScheduleAnyway, so
	// only a pod's own DoNotSchedule constraints can filter.
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	nsLabels := f.namespaceLabels(pod.Namespace)
	return f.anti.matches(pod, nsLabels)
}

// canUseView reports whether pod's PreFilter state may be computed over a view
// of pods of its namespace (see viewLister), and kept current with the changes
// of that namespace: its required (anti-)affinity terms name no other
// namespace and no namespace selector, and no anti-affinity term of a pod that
// does reach across namespaces matches it. Spread constraints count pods of the
// pod's own namespace only.
func (f *fitter) canUseView(pod *corev1.Pod) bool {
	if !ownNamespaceOnly(pod) {
		return false
	}
	nsLabels := f.namespaceLabels(pod.Namespace)
	return !f.anti.matchesCrossNamespace(pod, nsLabels)
}

// ownNamespaceOnly reports whether every required pod (anti-)affinity term of
// pod selects pods of its own namespace only.
func ownNamespaceOnly(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	for _, t := range terms {
		if t.NamespaceSelector != nil {
			return false
		}
		for _, ns := range t.Namespaces {
			if ns != pod.Namespace {
				return false
			}
		}
	}
	return true
}

// filter runs the Filter plugins of the pod's cycle on a node.
func (f *fitter) filter(ctx context.Context, c *cycle, pod *corev1.Pod, node fwk.NodeInfo) *fwk.Status {
	return c.fw.RunFilterPlugins(ctx, c.state, pod, node)
}

// filterOn runs the Filter plugins of cycle c for pod on node, after
// checking that PreFilter did not rule the node out.
func (f *fitter) filterOn(ctx context.Context, c *cycle, pod *corev1.Pod, node fwk.NodeInfo) *fwk.Status {
	if _, ok := c.only[node.Node().Name]; c.only != nil && !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't match PreFilter's node names")
	}
	return f.filter(ctx, c, pod, node)
}

// admits reports whether the plugins that say where a pod may run
// (constraintPlugins) let pod run on node, with the PreFilter state of c, a
// cycle of the full framework: whether node would take it however empty.
// The state's keys are the plugins' own, so the constraints framework reads
// what full's PreFilter wrote.
func (f *fitter) admits(ctx context.Context, c *cycle, pod *corev1.Pod, node fwk.NodeInfo) (bool, error) {
	if _, ok := c.only[node.Node().Name]; c.only != nil && !ok {
		return false, nil
	}
	if f.constraints == nil {
		fw, err := f.buildConstraints()
		if err != nil {
			return false, err
		}
		f.constraints = fw
	}
	return f.constraints.RunFilterPlugins(ctx, c.state, pod, node).IsSuccess(), nil
}

// nodeInfo returns the snapshot's NodeInfo of a node.
func (f *fitter) nodeInfo(node string) fwk.NodeInfo {
	ni, err := f.snap.Get(node)
	if err != nil {
		return nil
	}
	return ni
}

// nodeInfos returns the NodeInfos of nodes (nil for those not in the
// snapshot). The snapshot's mutations change a NodeInfo in place, so they
// stay good while the fitter is used.
func (f *fitter) nodeInfos(nodes []string) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(nodes))
	for i, name := range nodes {
		out[i] = f.nodeInfo(name)
	}
	return out
}

// add places pod on node in the snapshot, with res as its resource requests
// (see sizedPodInfo).
func (f *fitter) add(pod *corev1.Pod, node string, res fwk.PodResource) error {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return err
	}
	info := &sizedPodInfo{PodInfo: *pi, res: res}
	if pods, ok := f.deferred[node]; ok {
		f.deferred[node] = append(pods, info)
	} else if err := f.snap.AddPod(info, node); err != nil {
		return err
	}
	f.changed(info, node, 1)
	return nil
}

// remove takes pod off node in the snapshot.
func (f *fitter) remove(pod *corev1.Pod, node string) error {
	for i, pi := range f.deferred[node] {
		if pi.GetPod().UID == pod.UID {
			f.deferred[node] = slices.Delete(f.deferred[node], i, i+1)
			f.changed(pi, node, -1)
			return nil
		}
	}
	ni, err := f.snap.Get(node)
	if err != nil {
		return err
	}
	var removed fwk.PodInfo
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == pod.UID {
			removed = pi
			break
		}
	}
	if removed == nil {
		return fmt.Errorf("pod %s/%s is not on node %s in the snapshot", pod.Namespace, pod.Name, node)
	}
	if err := f.snap.RemovePod(f.logger, pod, node); err != nil {
		return err
	}
	f.changed(removed, node, -1)
	return nil
}

// changed logs a change to the snapshot and keeps the pod index and the
// anti-affinity index in step with it.
func (f *fitter) changed(pi fwk.PodInfo, node string, delta int) {
	ni, _ := f.snap.Get(node)
	f.views.changed(pi, ni.Node(), delta)
	f.anti.add(pi, delta)
	i := len(f.log)
	f.log = append(f.log, mutation{pod: pi, node: ni, delta: delta})
	ns := pi.GetPod().Namespace
	f.byNS[ns] = append(f.byNS[ns], i)
	if reachesOtherNamespaces(pi) {
		f.cross = append(f.cross, i)
	}
	if f.onChange != nil {
		f.onChange(node)
	}
}

// describe turns a failed Filter status into "Plugin: message".
func describe(s *fwk.Status) string {
	msg := strings.Join(s.Reasons(), "; ")
	if msg == "" {
		msg = s.Message()
	}
	if s.Plugin() != "" {
		return s.Plugin() + ": " + msg
	}
	return msg
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

type errNodeNotFound string

func (e errNodeNotFound) Error() string {
	return fmt.Sprintf("node %q not found in the snapshot", string(e))
}

// sizedPodInfo is a PodInfo whose resource requests were computed by the
// caller with the scheduler's own PodInfo.CalculateResource, once per distinct
// shape (see resourceMemo). NodeInfo reads requests only through
// CalculateResource, when a pod is added or removed; computing them allocates
// about 10 KB per pod, and the plan adds the same pod (a copy bound to another
// node) many times.
type sizedPodInfo struct {
	framework.PodInfo
	res fwk.PodResource
}

// CalculateResource returns the requests given when the pod was added.
func (p *sizedPodInfo) CalculateResource() fwk.PodResource { return p.res }

// podResource returns the scheduler's resource requests of pod.
func podResource(pod *corev1.Pod) fwk.PodResource {
	return (&framework.PodInfo{Pod: pod}).CalculateResource()
}
