package snapshot

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Checks of a loaded snapshot, decided case by case as the API server and
// kubectl would (docs/planner.md lists them):
//
//   - an object without a name, or with a negative quantity, is refused: the
//     API server refuses it, so no cluster holds it;
//   - a quantity beyond any machine (more than 1G CPUs, or 1Pi of memory or of
//     anything else) is refused: the planner sums quantities in int64 and
//     such values would overflow, planning nonsense;
//   - the same object twice (kind, namespace and name) with other contents is
//     refused: the snapshot mixes two moments, and which is the cluster is
//     unknown;
//   - the same object twice, identical, is counted once, with a warning
//     (files concatenated, or `kubectl get pods,all`);
//   - a pod bound to a node the snapshot lacks is kept, with a warning: the
//     planner leaves it out, as it cannot move it or count it on a node. A
//     finished pod (Succeeded or Failed) on a deleted node is normal and not
//     reported.

var (
	maxCPU      = resource.MustParse("1G")
	maxQuantity = resource.MustParse("1Pi")
)

// maxListed bounds the problems and examples a message lists.
const maxListed = 10

// assemble builds the snapshot from the decoded objects in input order and
// checks them.
func assemble(slots []*slot) (*Snapshot, error) {
	type key struct{ kind, namespace, name string }
	seen := make(map[key]*slot, len(slots))
	var problems, identical []string
	s := &Snapshot{}
	for _, sl := range slots {
		if sl.skip || (sl.obj == nil && sl.err == nil) {
			continue
		}
		if sl.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", sl.where, sl.err))
			continue
		}
		kind := reflect.TypeOf(sl.obj).Elem().Name()
		m, err := meta.Accessor(sl.obj)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", sl.where, err))
			continue
		}
		if m.GetName() == "" {
			problems = append(problems, fmt.Sprintf("%s: %s without metadata.name: the API server requires one", sl.where, kind))
			continue
		}
		id := m.GetName()
		if m.GetNamespace() != "" {
			id = m.GetNamespace() + "/" + id
		}
		if errs := sl.quantityErrs; len(errs) > 0 {
			for _, e := range errs {
				problems = append(problems, fmt.Sprintf("%s: %s %s: %v", sl.where, kind, id, e))
			}
			continue
		}
		k := key{kind, m.GetNamespace(), m.GetName()}
		if prev, ok := seen[k]; ok {
			if equality.Semantic.DeepEqual(prev.obj, sl.obj) {
				identical = append(identical, fmt.Sprintf("%s %s (%s and %s)", kind, id, prev.where, sl.where))
			} else {
				problems = append(problems, fmt.Sprintf("%s: %s %s is also %s, with other contents: a snapshot holds each object once", sl.where, kind, id, prev.where))
			}
			continue
		}
		seen[k] = sl
		s.add(sl.obj)
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	switch len(identical) {
	case 0:
	case 1:
		s.Warnings = append(s.Warnings, "1 object appears more than once, identical; it is counted once: "+identical[0])
	default:
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d objects appear more than once, identical; each is counted once: %s",
			len(identical), examples(identical)))
	}
	if w := podsOnUnknownNodes(s); w != "" {
		s.Warnings = append(s.Warnings, w)
	}
	return s, nil
}

// InvalidError lists the problems of a snapshot, in input order.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the snapshot:", len(e.Problems))
	for i, p := range e.Problems {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Problems)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\n  - %s", p)
	}
	return b.String()
}

func examples(list []string) string {
	if len(list) <= maxListed {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(list)-maxListed)
}

func podsOnUnknownNodes(s *Snapshot) string {
	nodes := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes[n.Name] = true
	}
	var lost []string
	for _, p := range s.Pods {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		lost = append(lost, fmt.Sprintf("%s/%s (node %s)", p.Namespace, p.Name, p.Spec.NodeName))
	}
	switch len(lost) {
	case 0:
		return ""
	case 1:
		return "1 pod is bound to a node that is not in the snapshot and is left out of the plan: " + lost[0] +
			"; add the node to the snapshot if it still exists"
	}
	return fmt.Sprintf("%d pods are bound to nodes that are not in the snapshot and are left out of the plan: %s; add those nodes to the snapshot if they still exist",
		len(lost), examples(lost))
}

// checkQuantities returns the quantities of a node or pod that are negative
// or beyond any machine.
func checkQuantities(obj any) field.ErrorList {
	if quantitiesOK(obj) {
		return nil
	}
	var errs field.ErrorList
	switch o := obj.(type) {
	case *corev1.Node:
		st := field.NewPath("status")
		checkList(st.Child("capacity"), o.Status.Capacity, &errs)
		checkList(st.Child("allocatable"), o.Status.Allocatable, &errs)
	case *corev1.Pod:
		spec := field.NewPath("spec")
		for name, cs := range map[string][]corev1.Container{"containers": o.Spec.Containers, "initContainers": o.Spec.InitContainers} {
			for i, c := range cs {
				p := spec.Child(name).Index(i).Child("resources")
				checkList(p.Child("requests"), c.Resources.Requests, &errs)
				checkList(p.Child("limits"), c.Resources.Limits, &errs)
			}
		}
		checkList(spec.Child("overhead"), o.Spec.Overhead, &errs)
		if r := o.Spec.Resources; r != nil {
			checkList(spec.Child("resources", "requests"), r.Requests, &errs)
			checkList(spec.Child("resources", "limits"), r.Limits, &errs)
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// quantitiesOK reports whether every quantity checkQuantities checks is
// within bounds, without the paths its messages need: the common case.
func quantitiesOK(obj any) bool {
	switch o := obj.(type) {
	case *corev1.Node:
		return listOK(o.Status.Capacity) && listOK(o.Status.Allocatable)
	case *corev1.Pod:
		for _, cs := range [2][]corev1.Container{o.Spec.Containers, o.Spec.InitContainers} {
			for i := range cs {
				if !listOK(cs[i].Resources.Requests) || !listOK(cs[i].Resources.Limits) {
					return false
				}
			}
		}
		if r := o.Spec.Resources; r != nil && (!listOK(r.Requests) || !listOK(r.Limits)) {
			return false
		}
		return listOK(o.Spec.Overhead)
	}
	return true
}

func listOK(rl corev1.ResourceList) bool {
	for name, q := range rl {
		limit := &maxQuantity
		if name == corev1.ResourceCPU {
			limit = &maxCPU
		}
		if q.Sign() < 0 || q.Cmp(*limit) > 0 {
			return false
		}
	}
	return true
}

func checkList(p *field.Path, rl corev1.ResourceList, errs *field.ErrorList) {
	for name, q := range rl {
		limit := maxQuantity
		if name == corev1.ResourceCPU {
			limit = maxCPU
		}
		switch {
		case q.Sign() < 0:
			*errs = append(*errs, field.Invalid(p.Key(string(name)), excerpt(q.String(), 64), "must be 0 or more, as the API server requires"))
		case q.Cmp(limit) > 0:
			*errs = append(*errs, field.Invalid(p.Key(string(name)), excerpt(q.String(), 64),
				fmt.Sprintf("must be at most %s: no machine has more, and the planner's sums would overflow", limit.String())))
		}
	}
}
