package snapshot

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

// Informers is the part of the manager's cache (cache.Cache) that hands out
// its informers.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// FromReader builds a snapshot from a controller-runtime reader: the manager's
// cache in the controller, so that after the initial sync a snapshot costs no
// request to the apiserver.
//
// A reader that implements Revisioner gives the snapshot its Revision; one
// that implements Snapshotter gives the whole snapshot.
//
// The snapshot holds the reader's own objects, not copies: a deep copy of
// every pod of a large cluster on every cycle, and before every eviction, is
// garbage the size of the cache. From the manager's cache (Informers whose
// informers are client-go's SharedIndexInformer) the objects are read
// straight from the informers' stores. A List, even with
// client.UnsafeDisableDeepCopy (the way for other readers), copies every
// object's top-level struct into the list's items: for a pod about 1.2 KB,
// 18 MB a cycle at 15,000 pods, kept alive as long as the snapshot is.
// Whoever holds the snapshot reads its objects and never changes them; the
// planner places copies.
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
		item     client.Object // of the list's kind, for its informer
	}{
		{"nodes", &nodes, &corev1.Node{}}, {"pods", &pods, &corev1.Pod{}}, {"poddisruptionbudgets", &pdbs, &policyv1.PodDisruptionBudget{}},
		{"namespaces", &nss, &corev1.Namespace{}}, {"services", &svcs, &corev1.Service{}},
		{"replicationcontrollers", &rcs, &corev1.ReplicationController{}}, {"replicasets", &rss, &appsv1.ReplicaSet{}},
		{"statefulsets", &stss, &appsv1.StatefulSet{}}, {"persistentvolumes", &pvs, &corev1.PersistentVolume{}},
		{"persistentvolumeclaims", &pvcs, &corev1.PersistentVolumeClaim{}}, {"storageclasses", &scs, &storagev1.StorageClass{}},
		{"csinodes", &csinds, &storagev1.CSINode{}},
	}
	inf, _ := r.(Informers)
	for _, l := range lists {
		if inf != nil {
			done, err := fromStore(ctx, inf, l.item, s)
			if err != nil {
				return nil, &ListError{Resource: l.resource, Err: err}
			}
			if done {
				continue
			}
		}
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

// fromStore adds to s the objects of obj's kind from the store of inf's
// informer for it, when that informer is a client-go SharedIndexInformer (the
// manager's cache); done is false when it is not, and the caller lists.
func fromStore(ctx context.Context, inf Informers, obj client.Object, s *Snapshot) (done bool, err error) {
	i, err := inf.GetInformer(ctx, obj)
	if err != nil {
		return false, err
	}
	shared, ok := i.(toolscache.SharedIndexInformer)
	if !ok {
		return false, nil
	}
	for _, o := range shared.GetIndexer().List() {
		s.add(o)
	}
	return true, nil
}
