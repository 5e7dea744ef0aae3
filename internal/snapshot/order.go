package snapshot

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InListOrder sorts the objects of s in the order a LIST from the apiserver
// returns them, the order `spotter plan` reads them in: by their key in
// storage, namespace/name. An informer's cache lists in no particular order,
// and where the planner meets several reasons (the first pod that blocks a
// node, say) it gives the first: without this, the reason a node is not
// drainable changed with the cache's order. The rescheduler sorts its
// snapshots with it; a kind already in order costs one pass.
func InListOrder(s *Snapshot) {
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
// compares keys ("a-b/x" before "a/x"), without building the strings. It
// returns at once when they are in that order already. The keys of a list
// are unique, so the sort need not be stable.
func byKey[T metav1.Object](objs []T) {
	// The keys are read once: the sort compares strings, not objects
	// through their interface.
	type keyed struct {
		namespace, name string
		obj             T
	}
	keys := make([]keyed, len(objs))
	for i, o := range objs {
		keys[i] = keyed{o.GetNamespace(), o.GetName(), o}
	}
	byKey := func(a, b keyed) int { return CompareKeys(a.namespace, a.name, b.namespace, b.name) }
	if slices.IsSortedFunc(keys, byKey) {
		return
	}
	slices.SortFunc(keys, byKey)
	for i := range keys {
		objs[i] = keys[i].obj
	}
}

// CompareKeys compares the storage keys of two objects, namespace + "/" +
// name (the name alone without a namespace), as strings: the order of a LIST.
func CompareKeys(ns1, name1, ns2, name2 string) int {
	if ns1 == ns2 {
		return cmp.Compare(name1, name2)
	}
	if ns1 == "" || ns2 == "" {
		return cmp.Compare(key(ns1, name1), key(ns2, name2))
	}
	// The keys differ within the namespaces or at the end of the shorter
	// one, where the other key has "/" (never in a namespace's name).
	k := 0
	for k < len(ns1) && k < len(ns2) && ns1[k] == ns2[k] {
		k++
	}
	c1, c2 := byte('/'), byte('/')
	if k < len(ns1) {
		c1 = ns1[k]
	}
	if k < len(ns2) {
		c2 = ns2[k]
	}
	return cmp.Compare(c1, c2)
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
