package snapshot

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Revisioner is a reader that names the state its lists show: the same
// Revision, the same objects (see Snapshot.Revision).
type Revisioner interface {
	Revision() string
}

// Snapshotter is a reader that takes snapshots of its objects itself, without
// the lists (the simulator's world, whose lists would be copies of it). It
// hands out what FromReader would build from its lists, Revision included,
// in slices the caller may reorder.
type Snapshotter interface {
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// FromReader builds a snapshot from a controller-runtime reader: the manager's
// cache in the controller, so that after the initial sync a snapshot costs no
// request to the apiserver.
//
// A reader that implements Revisioner gives the snapshot its Revision; one
// that implements Snapshotter gives the whole snapshot.
//
// The snapshot holds the reader's own objects, not copies
// (client.UnsafeDisableDeepCopy): a deep copy of every pod of a large
// cluster on every cycle, and before every eviction, is garbage the size of
// the cache. Whoever holds the snapshot
// reads its objects and never changes them; the planner places copies.
func FromReader(ctx context.Context, r client.Reader) (*Snapshot, error) {
	if ss, ok := r.(Snapshotter); ok {
		return ss.Snapshot(ctx)
	}
	s := &Snapshot{}
	if rv, ok := r.(Revisioner); ok {
		s.Revision = rv.Revision()
	}
	var (
		nodes  corev1.NodeList
		pods   corev1.PodList
		pdbs   policyv1.PodDisruptionBudgetList
		nss    corev1.NamespaceList
		svcs   corev1.ServiceList
		rcs    corev1.ReplicationControllerList
		rss    appsv1.ReplicaSetList
		stss   appsv1.StatefulSetList
		pvs    corev1.PersistentVolumeList
		pvcs   corev1.PersistentVolumeClaimList
		scs    storagev1.StorageClassList
		csinds storagev1.CSINodeList
	)
	lists := []struct {
		resource string
		list     client.ObjectList
	}{
		{"nodes", &nodes}, {"pods", &pods}, {"poddisruptionbudgets", &pdbs}, {"namespaces", &nss},
		{"services", &svcs}, {"replicationcontrollers", &rcs}, {"replicasets", &rss}, {"statefulsets", &stss},
		{"persistentvolumes", &pvs}, {"persistentvolumeclaims", &pvcs}, {"storageclasses", &scs}, {"csinodes", &csinds},
	}
	for _, l := range lists {
		if err := r.List(ctx, l.list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, &ListError{Resource: l.resource, Err: err}
		}
		// EachListItem hands out pointers into the list: no copies.
		if err := meta.EachListItem(l.list, func(o runtime.Object) error { s.add(o); return nil }); err != nil {
			return nil, err
		}
	}
	return s, nil
}
