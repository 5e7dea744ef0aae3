// Package snapshot holds a point-in-time copy of the cluster objects the planner
// reads: nodes, pods, PodDisruptionBudgets, the volume objects the scheduler's
// volume plugins need, and the workload controllers that own pods. It loads them
// from a file (`kubectl get ... -o yaml` output) or from a cluster.
package snapshot

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Snapshot is a consistent set of cluster objects. The planner never modifies
// them.
type Snapshot struct {
	Nodes            []*corev1.Node
	Pods             []*corev1.Pod
	PDBs             []*policyv1.PodDisruptionBudget
	Namespaces       []*corev1.Namespace
	Services         []*corev1.Service
	ReplicaSets      []*appsv1.ReplicaSet
	StatefulSets     []*appsv1.StatefulSet
	PVs              []*corev1.PersistentVolume
	PVCs             []*corev1.PersistentVolumeClaim
	StorageClasses   []*storagev1.StorageClass
	CSINodes         []*storagev1.CSINode
	ReplicationCtrls []*corev1.ReplicationController
	// Warnings are what loading found odd but planned anyway (an object
	// given twice, identical; pods on nodes the snapshot lacks), one line
	// each, for the user.
	Warnings []string
	// Revision, when not empty, names the state of the cluster the snapshot
	// was read at: two snapshots of one source with the same Revision hold
	// the same objects, and the planner answers the second from its last
	// plan. FromReader takes it from a reader that can tell (the
	// simulator's); a copy that changes anything must clear it.
	Revision string
}

// Counts summarises a snapshot for progress and error messages.
func (s *Snapshot) Counts() string {
	return plural(len(s.Nodes), "node") + ", " + plural(len(s.Pods), "pod") + ", " + plural(len(s.PDBs), "PodDisruptionBudget")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// DeepCopy returns a copy of s whose objects are copies too: changing them
// changes nothing in s.
func (s *Snapshot) DeepCopy() *Snapshot {
	return &Snapshot{
		Nodes: copies(s.Nodes), Pods: copies(s.Pods), PDBs: copies(s.PDBs), Namespaces: copies(s.Namespaces),
		Services: copies(s.Services), ReplicaSets: copies(s.ReplicaSets), StatefulSets: copies(s.StatefulSets),
		PVs: copies(s.PVs), PVCs: copies(s.PVCs), StorageClasses: copies(s.StorageClasses), CSINodes: copies(s.CSINodes),
		ReplicationCtrls: copies(s.ReplicationCtrls), Warnings: slices.Clone(s.Warnings), Revision: s.Revision,
	}
}

func copies[T interface{ DeepCopy() T }](objs []T) []T {
	if objs == nil {
		return nil
	}
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
