package testenv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spotter.dev/spotter/internal/snapshot"
)

// WriteOptions tune WriteSnapshot. The zero value is ready to use.
type WriteOptions struct {
	// Workers is how many requests are in flight at once. Default 16.
	Workers int
	// QPS and Burst bound the writer's client; they replace those of the
	// configuration given. Default 5,000 and 10,000: the apiserver, not the
	// client, sets the pace.
	QPS   float32
	Burst int
	// Logf, when set, receives a progress line every ProgressEvery while a
	// kind is being written (kind, done/total, rate) and one when a kind that
	// took that long is done.
	Logf func(format string, args ...any)
	// ProgressEvery is the interval of the progress lines. Default 10s.
	ProgressEvery time.Duration
}

// WriteSnapshot writes the objects of s into the apiserver cfg points at, as
// they are in s: namespaces (those listed, and those of the namespaced objects
// that are not), storage classes, CSINodes, persistent volumes and claims with
// their status, nodes with their taints and status, services, replication
// controllers, ReplicaSets and StatefulSets with their status, pods bound to
// their node (spec.nodeName) with their status, and PodDisruptionBudgets with
// their status (observedGeneration set to the generation the apiserver gave).
// Pods that were terminating in s (deletionTimestamp set) are deleted after
// their status is written: with no kubelet they stay Terminating. Server-set
// metadata (UID, resourceVersion, creation time, managed fields, generation)
// is the apiserver's own, and services get cluster IPs from its range
// (headless ones stay headless).
//
// It is meant for an apiserver with no kube-controller-manager, scheduler or
// kubelets (StartAPIServer): nothing then changes what was written; with a
// controller-manager the workload controllers would act on what it writes.
//
// Objects of one kind are written in parallel by opts.Workers workers, kind
// after kind. It stops at the first error, which names the object. It
// returns, for every pod of s by namespace/name, whether it was terminating.
func WriteSnapshot(ctx context.Context, cfg *rest.Config, s *snapshot.Snapshot, opts WriteOptions) (map[string]bool, error) {
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	if opts.QPS <= 0 {
		opts.QPS = 5000
	}
	if opts.Burst <= 0 {
		opts.Burst = 10000
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 10 * time.Second
	}
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = opts.QPS, opts.Burst
	// Protobuf costs the apiserver (and this process) far less CPU than JSON
	// for 150,000 pods.
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	w := &snapshotWriter{c: c, opts: opts}

	terminating := make(map[string]bool, len(s.Pods))
	for _, p := range s.Pods {
		terminating[p.Namespace+"/"+p.Name] = p.DeletionTimestamp != nil
	}
	steps := []func(context.Context) error{
		func(ctx context.Context) error {
			return each(ctx, w, "namespaces", namespacesOf(s), w.namespace)
		},
		func(ctx context.Context) error {
			return each(ctx, w, "storageclasses", s.StorageClasses, func(ctx context.Context, o *storagev1.StorageClass) error {
				_, err := c.StorageV1().StorageClasses().Create(ctx, fresh(o), metav1.CreateOptions{})
				return err
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "csinodes", s.CSINodes, func(ctx context.Context, o *storagev1.CSINode) error {
				_, err := c.StorageV1().CSINodes().Create(ctx, fresh(o), metav1.CreateOptions{})
				return err
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "persistentvolumes", s.PVs, func(ctx context.Context, o *corev1.PersistentVolume) error {
				pvs := c.CoreV1().PersistentVolumes()
				return createWithStatus(ctx, o, pvs.Create, pvs.UpdateStatus, func(n, o *corev1.PersistentVolume) { n.Status = o.Status })
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "persistentvolumeclaims", s.PVCs, func(ctx context.Context, o *corev1.PersistentVolumeClaim) error {
				pvcs := c.CoreV1().PersistentVolumeClaims(o.Namespace)
				return createWithStatus(ctx, o, pvcs.Create, pvcs.UpdateStatus, func(n, o *corev1.PersistentVolumeClaim) { n.Status = o.Status })
			})
		},
		func(ctx context.Context) error { return each(ctx, w, "nodes", s.Nodes, w.node) },
		func(ctx context.Context) error {
			return each(ctx, w, "services", s.Services, func(ctx context.Context, o *corev1.Service) error {
				obj := fresh(o)
				if obj.Spec.ClusterIP != corev1.ClusterIPNone {
					// The snapshot's IPs may lie outside this apiserver's range.
					obj.Spec.ClusterIP, obj.Spec.ClusterIPs = "", nil
				}
				_, err := c.CoreV1().Services(o.Namespace).Create(ctx, obj, metav1.CreateOptions{})
				return err
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "replicationcontrollers", s.ReplicationCtrls, func(ctx context.Context, o *corev1.ReplicationController) error {
				rcs := c.CoreV1().ReplicationControllers(o.Namespace)
				return createWithStatus(ctx, o, rcs.Create, rcs.UpdateStatus, func(n, o *corev1.ReplicationController) {
					n.Status = o.Status
					n.Status.ObservedGeneration = n.Generation
				})
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "replicasets", s.ReplicaSets, func(ctx context.Context, o *appsv1.ReplicaSet) error {
				rss := c.AppsV1().ReplicaSets(o.Namespace)
				return createWithStatus(ctx, o, rss.Create, rss.UpdateStatus, func(n, o *appsv1.ReplicaSet) {
					n.Status = o.Status
					n.Status.ObservedGeneration = n.Generation
				})
			})
		},
		func(ctx context.Context) error {
			return each(ctx, w, "statefulsets", s.StatefulSets, func(ctx context.Context, o *appsv1.StatefulSet) error {
				sss := c.AppsV1().StatefulSets(o.Namespace)
				return createWithStatus(ctx, o, sss.Create, sss.UpdateStatus, func(n, o *appsv1.StatefulSet) {
					n.Status = o.Status
					n.Status.ObservedGeneration = n.Generation
				})
			})
		},
		func(ctx context.Context) error { return each(ctx, w, "pods", s.Pods, w.pod) },
		func(ctx context.Context) error {
			return each(ctx, w, "poddisruptionbudgets", s.PDBs, func(ctx context.Context, o *policyv1.PodDisruptionBudget) error {
				pdbs := c.PolicyV1().PodDisruptionBudgets(o.Namespace)
				return createWithStatus(ctx, o, pdbs.Create, pdbs.UpdateStatus, func(n, o *policyv1.PodDisruptionBudget) {
					n.Status = o.Status
					n.Status.ObservedGeneration = n.Generation
				})
			})
		},
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return terminating, nil
}

type snapshotWriter struct {
	c    kubernetes.Interface
	opts WriteOptions
}

func (w *snapshotWriter) namespace(ctx context.Context, ns *corev1.Namespace) error {
	_, err := w.c.CoreV1().Namespaces().Create(ctx, fresh(ns), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // default, kube-system, ...
		return nil
	}
	return err
}

func (w *snapshotWriter) node(ctx context.Context, n *corev1.Node) error {
	nodes := w.c.CoreV1().Nodes()
	created, err := nodes.Create(ctx, fresh(n), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The apiserver's TaintNodesByCondition admission taints a new node
	// not-ready until the node lifecycle controller sees it Ready; there is
	// none here: the snapshot's taints are written back.
	created.Spec.Taints = n.Spec.Taints
	if created, err = nodes.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	created.Status = n.Status
	_, err = nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func (w *snapshotWriter) pod(ctx context.Context, p *corev1.Pod) error {
	pods := w.c.CoreV1().Pods(p.Namespace)
	// Created with spec.nodeName set: bound, as if scheduled. Creation
	// resets the status to Pending; the snapshot's is written after.
	if err := createWithStatus(ctx, p, pods.Create, pods.UpdateStatus, func(n, o *corev1.Pod) { n.Status = o.Status }); err != nil {
		return err
	}
	if p.DeletionTimestamp != nil {
		return pods.Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	return nil
}

// createWithStatus creates a fresh copy of o, gives the created object o's
// status (setStatus) and writes it through the status subresource: creation
// ignores the status it is given.
func createWithStatus[T object[T]](ctx context.Context, o T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	updateStatus func(context.Context, T, metav1.UpdateOptions) (T, error),
	setStatus func(created, from T)) error {
	created, err := create(ctx, fresh(o), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	setStatus(created, o)
	_, err = updateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// namespacesOf returns the namespaces of s and, made up, those its
// namespaced objects name that it does not list.
func namespacesOf(s *snapshot.Snapshot) []*corev1.Namespace {
	out := append([]*corev1.Namespace(nil), s.Namespaces...)
	seen := map[string]bool{}
	for _, ns := range s.Namespaces {
		seen[ns.Name] = true
	}
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}
	for _, o := range s.Pods {
		add(o.Namespace)
	}
	for _, o := range s.PDBs {
		add(o.Namespace)
	}
	for _, o := range s.PVCs {
		add(o.Namespace)
	}
	for _, o := range s.Services {
		add(o.Namespace)
	}
	for _, o := range s.ReplicationCtrls {
		add(o.Namespace)
	}
	for _, o := range s.ReplicaSets {
		add(o.Namespace)
	}
	for _, o := range s.StatefulSets {
		add(o.Namespace)
	}
	return out
}

// object is a Kubernetes API object that copies itself, as every typed
// object does.
type object[T any] interface {
	metav1.Object
	DeepCopy() T
}

// fresh returns a copy of o without the metadata the apiserver sets.
func fresh[T object[T]](o T) T {
	c := o.DeepCopy()
	c.SetResourceVersion("")
	c.SetUID("")
	c.SetCreationTimestamp(metav1.Time{})
	c.SetDeletionTimestamp(nil)
	c.SetDeletionGracePeriodSeconds(nil)
	c.SetManagedFields(nil)
	c.SetGeneration(0)
	return c
}

// each runs write on every item with w's workers and returns the first error,
// naming the object; the others stop at their next item.
func each[T metav1.Object](ctx context.Context, w *snapshotWriter, kind string, items []T, write func(context.Context, T) error) error {
	if len(items) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range min(w.opts.Workers, len(items)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(items)) {
					return
				}
				o := items[i]
				if err := write(ctx, o); err != nil {
					cancel(fmt.Errorf("writing %s %s: %w", kind, key(o), err))
					return
				}
				done.Add(1)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	start := time.Now()
	tick := time.NewTicker(w.opts.ProgressEvery)
	defer tick.Stop()
	progress := func(what string) {
		if w.opts.Logf == nil {
			return
		}
		n, took := done.Load(), time.Since(start)
		w.opts.Logf("writing the snapshot: %s %d/%d %s in %s (%.0f/s)", kind, n, len(items), what, took.Round(time.Second), float64(n)/took.Seconds())
	}
	logged := false
	for {
		select {
		case <-tick.C:
			progress("so far")
			logged = true
		case <-finished:
			if err := context.Cause(ctx); err != nil {
				return err
			}
			if logged {
				progress("written")
			}
			return nil
		}
	}
}

func key(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
