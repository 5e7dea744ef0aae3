package rescheduler

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/snapshot"
)

// inListOrder sorts the objects of s in the order a LIST from the apiserver
// returns them, the order `spotter plan` reads them in: by their key in
// storage, namespace/name. An informer's cache lists in no particular order,
// and where the planner meets several reasons (the first pod that blocks a
// node, say) it gives the first: without this, the reason a node is not
// drainable changed with the cache's order.
func inListOrder(s *snapshot.Snapshot) {
	byKey(s.Nodes)
	byKey(s.Pods)
	byKey(s.PDBs)
	byKey(s.Namespaces)
	byKey(s.Services)
	byKey(s.ReplicaSets)
	byKey(s.StatefulSets)
	byKey(s.PVs)
	byKey(s.PVCs)
	byKey(s.StorageClasses)
	byKey(s.CSINodes)
	byKey(s.ReplicationCtrls)
}

// byKey sorts objects by namespace/name, compared as one string as etcd
// compares keys ("a-b/x" before "a/x").
func byKey[T metav1.Object](objs []T) {
	type keyed struct {
		key string
		obj T
	}
	ks := make([]keyed, len(objs))
	for i, o := range objs {
		ks[i] = keyed{o.GetName(), o}
		if ns := o.GetNamespace(); ns != "" {
			ks[i].key = ns + "/" + ks[i].key
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
	for i := range ks {
		objs[i] = ks[i].obj
	}
}
