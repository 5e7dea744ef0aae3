package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// What loading leaves out of the objects, because nothing that plans reads
// it (the planner, the classifier, the kube-scheduler Filter plugins the
// planner runs) and it can be most of an object's size:
//
//   - metadata.managedFields: server-side apply's bookkeeping, in every
//     object when kubectl writes it with --show-managed-fields;
//   - the annotation kubectl.kubernetes.io/last-applied-configuration:
//     kubectl apply's copy of the whole object as applied;
//   - a node's status.images: every image on the node, with its size; the
//     scheduler reads them only to score (ImageLocality), and the planner
//     runs no score plugin.
//
// They are still read and checked, so an input is refused or accepted as
// before; only the decoded objects are smaller. One consequence: the same
// object given twice, the copies differing only there, is counted once with
// a warning (check.go), where it was refused; both copies plan alike.
// TestLoadChangesNoPlan plans a cluster with and without them.

// lastAppliedAnnotation is kubectl apply's copy of the object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// compact drops what loading leaves out from an object decoded whole.
func compact(obj any) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastAppliedAnnotation)
		}
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
}
