package world

import (
	"context"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/sim/scenario"
	kubescheduler "spotter.dev/spotter/internal/sim/scheduler"
)

// Scheduler binds pending pods where the kube-scheduler's default profile
// puts them (package scheduler): the world never asks the planner, whose
// predictions it scores.
type Scheduler struct {
	w           *World
	k           *kubescheduler.Scheduler
	lastVersion uint64
	// Unschedulable are the pods the last run could not place.
	Unschedulable []*Pod
}

// NewScheduler builds the world's scheduler, with the objects its plugins
// read through informers: the namespaces, and each app's ReplicaSet or
// StatefulSet, whose selector brings the default topology spread
// constraints to its pods.
func NewScheduler(ctx context.Context, w *World) (*Scheduler, error) {
	k, err := newKubeScheduler(ctx, w)
	if err != nil {
		return nil, err
	}
	return &Scheduler{w: w, k: k}, nil
}

// newKubeScheduler is a kube-scheduler informed of the world's namespaces
// and of each app's ReplicaSet or StatefulSet, as the cluster's scheduler
// and the cluster autoscaler's simulation of it are.
func newKubeScheduler(ctx context.Context, w *World) (*kubescheduler.Scheduler, error) {
	k, err := kubescheduler.New(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range w.nsObjs {
		if err := k.Inform(ns); err != nil {
			return nil, err
		}
	}
	for _, a := range w.Apps {
		meta := metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name, UID: a.uid}
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: a.Name}}
		if a.Kind == scenario.StatefulSet {
			err = k.Inform(&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: selector}})
		} else {
			err = k.Inform(&appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Selector: selector}})
		}
		if err != nil {
			return nil, err
		}
	}
	return k, nil
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

// NodeObjs are the nodes' objects, in their order.
func NodeObjs(nodes []*Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n.Obj
	}
	return out
}

// maxInUnschedulable is how long a rejected pod waits at most before it is
// tried again (the kube-scheduler's podMaxInUnschedulablePodsDuration).
const maxInUnschedulable = 5 * time.Minute

// rejection is a failed attempt to place a pod. As in the kube-scheduler's
// queue, the pod is not tried again until something happened that may let it
// fit, or maxInUnschedulable passed: a Node object changed or gone, a bound
// pod gone (freeing room), a pod of its app bound (its topology spread
// changed), or the pod's own object changed. The scheduler's queueing hints
// ask finer questions (whether the freed room or the new node would fit the
// pod); this coarser test tries pods again more often, never less.
type rejection struct {
	at     time.Time
	obj    *corev1.Pod
	events uint64
	binds  uint64
}

// holds reports whether the pod's last rejection still stands: nothing
// happened since that may let it fit.
func (r *rejection) holds(w *World, p *Pod) bool {
	return r != nil && r.obj == p.Obj && r.events == w.schedEvents && r.binds == p.App.binds &&
		w.Now().Before(r.at.Add(maxInUnschedulable))
}

// Run places the pending pods, unless nothing changed since the last Run.
func (s *Scheduler) Run(ctx context.Context) error {
	w := s.w
	pending := w.pending()
	if len(pending) == 0 {
		s.Unschedulable = nil
		return nil
	}
	if w.version == s.lastVersion {
		return nil
	}
	nodes := w.ReadyNodes()
	if err := s.k.Sync(NodeObjs(nodes), w.boundObjs()); err != nil {
		return err
	}
	byName := make(map[string]*Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	s.Unschedulable = s.Unschedulable[:0]
	for _, p := range pending {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.rejected.holds(w, p) {
			s.Unschedulable = append(s.Unschedulable, p)
			continue
		}
		name, _, err := s.k.Schedule(ctx, p.Obj)
		if err != nil {
			return err
		}
		if name == "" {
			p.rejected = &rejection{at: w.Now(), obj: p.Obj, events: w.schedEvents, binds: p.App.binds}
			s.Unschedulable = append(s.Unschedulable, p)
			continue
		}
		w.bind(p, byName[name])
	}
	s.lastVersion = w.version
	return nil
}

// Kube is the kube-scheduler the world binds pods with, informed of the
// world's namespaces and apps: the hindsight rows ask it where an app's pods
// may run.
func (s *Scheduler) Kube() *kubescheduler.Scheduler { return s.k }
