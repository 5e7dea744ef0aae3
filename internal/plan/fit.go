package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
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

// fitter runs the scheduler framework's PreFilter and Filter plugins against a
// scheduler snapshot that the plan mutates as it commits placements.
type fitter struct {
	fw     framework.Framework
	snap   *cache.Snapshot
	logger klog.Logger
}

// initMetrics creates the scheduler's metric objects, which the framework
// updates; they are not registered with any registry Spotter serves.
var initMetrics sync.Once

// newFitter builds the scheduler framework over the objects of s.
func newFitter(ctx context.Context, s *snapshot.Snapshot) (*fitter, error) {
	initMetrics.Do(schedmetrics.InitMetrics)
	logger := klog.FromContext(ctx)
	var pods []*corev1.Pod
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" && !terminal(p) {
			pods = append(pods, p)
		}
	}
	snap := cache.NewSnapshot(pods, s.Nodes)
	if err := snap.StartMutations(); err != nil {
		return nil, err
	}

	factory, err := informerFactory(s)
	if err != nil {
		return nil, err
	}
	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("default scheduler configuration: %w", err)
	}
	profile := cfg.Profiles[0]
	profile.Plugins = filterOnly(profile.Plugins)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithLogger(logger),
	)
	if err != nil {
		return nil, fmt.Errorf("building the scheduler framework: %w", err)
	}
	return &fitter{fw: fw, snap: snap, logger: logger}, nil
}

// filterOnly keeps the profile's Filter plugins (and the queue sort and bind
// plugins a framework must have) and drops scoring, preemption and the rest.
func filterOnly(p *schedconfig.Plugins) *schedconfig.Plugins {
	out := p.DeepCopy()
	var kept []schedconfig.Plugin
	for _, pl := range p.MultiPoint.Enabled {
		if slices.Contains(FilterPlugins, pl.Name) || pl.Name == names.PrioritySort || pl.Name == names.DefaultBinder {
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
		adder{f.Core().V1().Nodes().Informer().GetIndexer(), anySlice(s.Nodes)},
		adder{f.Core().V1().Pods().Informer().GetIndexer(), anySlice(s.Pods)},
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

// prepare runs the PreFilter plugins for pod against the snapshot as it is now.
// It returns the cycle state for Filter, the nodes PreFilter restricts the pod
// to (nil: any), or the status of a PreFilter that rejects the pod outright.
func (f *fitter) prepare(ctx context.Context, pod *corev1.Pod) (fwk.CycleState, map[string]struct{}, *fwk.Status) {
	state := framework.NewCycleState()
	result, status, _ := f.fw.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		return nil, nil, status
	}
	var only map[string]struct{}
	if result != nil && result.NodeNames != nil {
		only = map[string]struct{}{}
		for n := range result.NodeNames {
			only[n] = struct{}{}
		}
	}
	return state, only, nil
}

// filter runs the Filter plugins for pod on the named node.
func (f *fitter) filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	ni, err := f.snap.Get(node)
	if err != nil {
		return fwk.AsStatus(err)
	}
	return f.fw.RunFilterPlugins(ctx, state, pod, ni)
}

// nodeInfo returns the snapshot's NodeInfo of a node.
func (f *fitter) nodeInfo(node string) fwk.NodeInfo {
	ni, err := f.snap.Get(node)
	if err != nil {
		return nil
	}
	return ni
}

// add places pod on node in the snapshot.
func (f *fitter) add(pod *corev1.Pod, node string) error {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return err
	}
	return f.snap.AddPod(pi, node)
}

// remove takes pod off node in the snapshot.
func (f *fitter) remove(pod *corev1.Pod, node string) error {
	return f.snap.RemovePod(f.logger, pod, node)
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
