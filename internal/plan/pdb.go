package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// budgets simulates PodDisruptionBudgets across a whole plan: every eviction the
// plan makes draws on the budgets covering the pod, and a node can be emptied
// only if each of them has enough left for all of its pods.
type budgets struct {
	byNamespace map[string][]*budget
	// byLabels memoizes covering by namespace and labels, which the pods of one
	// workload share; byPod memoizes it per pod.
	byLabels map[string][]*budget
	byPod    map[*corev1.Pod][]*budget
}

type budget struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	// allowed is status.disruptionsAllowed, or 0 when the status is stale or the
	// selector is invalid (the Eviction API then refuses too).
	allowed int32
	why     string // set when allowed was forced to 0
	used    int32
}

func newBudgets(pdbs []*policyv1.PodDisruptionBudget) *budgets {
	b := &budgets{byNamespace: map[string][]*budget{}, byLabels: map[string][]*budget{}, byPod: map[*corev1.Pod][]*budget{}}
	for _, pdb := range pdbs {
		bud := &budget{pdb: pdb, allowed: pdb.Status.DisruptionsAllowed}
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
		b.byNamespace[pdb.Namespace] = append(b.byNamespace[pdb.Namespace], bud)
	}
	return b
}

// covering returns the budgets whose selector matches pod.
func (b *budgets) covering(pod *corev1.Pod) []*budget {
	if out, ok := b.byPod[pod]; ok {
		return out
	}
	key := pod.Namespace + "/" + labels.Set(pod.Labels).String()
	out, ok := b.byLabels[key]
	if !ok {
		out = b.match(pod)
		b.byLabels[key] = out
	}
	b.byPod[pod] = out
	return out
}

func (b *budgets) match(pod *corev1.Pod) []*budget {
	var out []*budget
	set := labels.Set(pod.Labels)
	for _, bud := range b.byNamespace[pod.Namespace] {
		if bud.selector.Matches(set) {
			out = append(out, bud)
		}
	}
	return out
}

// take reserves one disruption for each pod in pods from every budget covering
// it. If a budget runs short, nothing is reserved and the returned reason names
// the budget, what it allows and what the plan needs.
func (b *budgets) take(pods []*corev1.Pod) (blocked *corev1.Pod, reason string) {
	need := map[*budget]int32{}
	first := map[*budget]*corev1.Pod{}
	var order []*budget
	for _, p := range pods {
		for _, bud := range b.covering(p) {
			if _, seen := need[bud]; !seen {
				order = append(order, bud)
				first[bud] = p
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
			return first[bud], reason
		}
	}
	for bud, n := range need {
		bud.used += n
	}
	return nil, ""
}

// give returns the disruptions take reserved for pods.
func (b *budgets) give(pods []*corev1.Pod) {
	for _, p := range pods {
		for _, bud := range b.covering(p) {
			bud.used--
		}
	}
}
