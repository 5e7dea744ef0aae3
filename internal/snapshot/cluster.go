package snapshot

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// ListError is a failed LIST of one resource.
type ListError struct {
	Resource string
	Err      error
}

func (e *ListError) Error() string { return fmt.Sprintf("listing %s: %v", e.Resource, e.Err) }

func (e *ListError) Unwrap() error { return e.Err }

// FromCluster reads a snapshot from a cluster with paginated LISTs (500 objects
// a page): a one-shot read for commands such as `spotter plan`. Controllers
// build snapshots from their informers' caches instead.
func FromCluster(ctx context.Context, client kubernetes.Interface) (*Snapshot, error) {
	core, apps, policy, storage := client.CoreV1(), client.AppsV1(), client.PolicyV1(), client.StorageV1()
	type listFunc = func(context.Context, metav1.ListOptions) (runtime.Object, error)
	lists := []struct {
		resource string
		list     listFunc
	}{
		{"nodes", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Nodes().List(ctx, o)
		}},
		{"pods", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Pods("").List(ctx, o)
		}},
		{"poddisruptionbudgets", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return policy.PodDisruptionBudgets("").List(ctx, o)
		}},
		{"namespaces", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Namespaces().List(ctx, o)
		}},
		{"services", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Services("").List(ctx, o)
		}},
		{"replicationcontrollers", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.ReplicationControllers("").List(ctx, o)
		}},
		{"replicasets", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return apps.ReplicaSets("").List(ctx, o)
		}},
		{"statefulsets", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return apps.StatefulSets("").List(ctx, o)
		}},
		{"persistentvolumes", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.PersistentVolumes().List(ctx, o)
		}},
		{"persistentvolumeclaims", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.PersistentVolumeClaims("").List(ctx, o)
		}},
		{"storageclasses", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return storage.StorageClasses().List(ctx, o)
		}},
		{"csinodes", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return storage.CSINodes().List(ctx, o)
		}},
	}
	s := &Snapshot{}
	for _, l := range lists {
		p := pager.New(l.list)
		p.PageSize = 500
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			s.add(obj)
			return nil
		})
		if err != nil {
			return nil, &ListError{Resource: l.resource, Err: err}
		}
	}
	return s, nil
}

// add appends a typed object to its list; other kinds are ignored.
func (s *Snapshot) add(obj any) {
	switch o := obj.(type) {
	case *corev1.Node:
		s.Nodes = append(s.Nodes, o)
	case *corev1.Pod:
		s.Pods = append(s.Pods, o)
	case *policyv1.PodDisruptionBudget:
		s.PDBs = append(s.PDBs, o)
	case *corev1.Namespace:
		s.Namespaces = append(s.Namespaces, o)
	case *corev1.Service:
		s.Services = append(s.Services, o)
	case *appsv1.ReplicaSet:
		s.ReplicaSets = append(s.ReplicaSets, o)
	case *appsv1.StatefulSet:
		s.StatefulSets = append(s.StatefulSets, o)
	case *corev1.PersistentVolume:
		s.PVs = append(s.PVs, o)
	case *corev1.PersistentVolumeClaim:
		s.PVCs = append(s.PVCs, o)
	case *storagev1.StorageClass:
		s.StorageClasses = append(s.StorageClasses, o)
	case *storagev1.CSINode:
		s.CSINodes = append(s.CSINodes, o)
	case *corev1.ReplicationController:
		s.ReplicationCtrls = append(s.ReplicationCtrls, o)
	}
}
