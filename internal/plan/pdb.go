package plan

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// budgets simulates PodDisruptionBudgets across a whole plan: every eviction the
// plan makes draws on the budgets covering the pod, and a node can be emptied
// only if each of them has enough left for all of its pods.
type budgets struct {
	// byLabel indexes each budget under one label its selector requires (key
	// and value); byNamespace holds, per namespace, the budgets whose selector
	// requires no single label value, which every pod of the namespace is
	// matched against.
	byLabel     map[labelKey][]*budget
	byNamespace map[string][]*budget
}

// labelKey is a label in a namespace.
type labelKey struct{ namespace, key, value string }

type budget struct {
	index    int // in the input, to keep the order of the answers
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	// allowed is status.disruptionsAllowed, or 0 when the status is stale or the
	// selector is invalid (the Eviction API then refuses too).
	allowed int32
	why     string // set when allowed was forced to 0
	used    int32
}

func newBudgets(pdbs []*policyv1.PodDisruptionBudget) *budgets {
	b := &budgets{byLabel: map[labelKey][]*budget{}, byNamespace: map[string][]*budget{}}
	for i, pdb := range pdbs {
		bud := &budget{index: i, pdb: pdb, allowed: pdb.Status.DisruptionsAllowed}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		switch {
		case err != nil:
			bud.selector, bud.allowed, bud.why = labels.Nothing(), 0, "invalid selector"
		case pdb.Status.ObservedGeneration < pdb.Generation:
			bud.selector, bud.allowed, bud.why = sel, 0, "status not yet computed by the disruption controller"
		default:
			bud.selector = sel
		}
		if pdb.Spec.Selector == nil {
			// A nil selector selects nothing in policy/v1.
			bud.selector = labels.Nothing()
		}
		if key, ok := requiredLabel(bud.selector); ok {
			key.namespace = pdb.Namespace
			b.byLabel[key] = append(b.byLabel[key], bud)
		} else {
			b.byNamespace[pdb.Namespace] = append(b.byNamespace[pdb.Namespace], bud)
		}
	}
	return b
}

// requiredLabel returns a label (key and value) that every set the selector
// matches has, if there is one.
func requiredLabel(sel labels.Selector) (labelKey, bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return labelKey{}, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := r.Values(); vals.Len() == 1 {
				return labelKey{key: r.Key(), value: vals.UnsortedList()[0]}, true
			}
		}
	}
	return labelKey{}, false
}

// covering returns the budgets whose selector matches pod.
func (b *budgets) covering(pod *corev1.Pod) []*budget {
	return b.match(pod)
}

func (b *budgets) match(pod *corev1.Pod) []*budget {
	var out []*budget
	set := labels.Set(pod.Labels)
	for _, bud := range b.byNamespace[pod.Namespace] {
		if bud.selector.Matches(set) {
			out = append(out, bud)
		}
	}
	// A budget is indexed under one label, and a pod has one value per key:
	// each budget is seen at most once.
	for k, v := range pod.Labels {
		for _, bud := range b.byLabel[labelKey{pod.Namespace, k, v}] {
			if bud.selector.Matches(set) {
				out = append(out, bud)
			}
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, func(x, y *budget) int { return cmp.Compare(x.index, y.index) })
	}
	return out
}

// take reserves one disruption for each pod from every budget covering it
// (covers[i] are the budgets covering pod i), and returns what it took, with
// -1. If a budget runs short, nothing is reserved: it returns the index of the
// first pod the budget covers and a reason that names the budget, what it
// allows and what the plan needs.
func (b *budgets) take(covers [][]*budget) (taken map[*budget]int32, blocked int, reason string) {
	need := map[*budget]int32{}
	first := map[*budget]int{}
	var order []*budget
	for i, c := range covers {
		for _, bud := range c {
			if _, seen := need[bud]; !seen {
				order = append(order, bud)
				first[bud] = i
			}
			need[bud]++
		}
	}
	for _, bud := range order {
		left := bud.allowed - bud.used
		if need[bud] > left {
			reason := fmt.Sprintf("PodDisruptionBudget %s/%s allows %d more disruption(s) in this plan, the node needs %d",
				bud.pdb.Namespace, bud.pdb.Name, max(left, 0), need[bud])
			if bud.why != "" {
				reason += " (" + bud.why + ")"
			}
			return nil, first[bud], reason
		}
	}
	for bud, n := range need {
		bud.used += n
	}
	return need, -1, ""
}

// give returns the disruptions take reserved.
func (b *budgets) give(taken map[*budget]int32) {
	for bud, n := range taken {
		bud.used -= n
	}
}
