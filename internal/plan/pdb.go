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

// budgets simulates PodDisruptionBudgets across a whole plan: a node's drain
// draws on the budgets covering its pods, as many disruptions as it makes at
// once, and a node can be emptied only if each of them has at least one left
// (its pods then go in waves; see take).
type budgets struct {
	// byLabel indexes each budget under one label its selector requires (key
	// and value); byNamespace holds, per namespace, the budgets whose selector
	// requires no single label value, which every pod of the namespace is
	// matched against.
	byLabel     map[labelKey][]*budget
	byNamespace map[string][]*budget
	// oneWave refuses nodes that would need waves: the plan's first pass,
	// and every pass with Planner.oneWave.
	oneWave bool
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

// take reserves disruptions for a node's movable pods (covers[i] are the
// budgets covering pod i) and puts each pod in a wave, numbered from 1.
//
// A budget that allows, after the earlier nodes of the plan, at least as many
// disruptions as the node's pods need from it lets them all go in the first
// wave. One that allows fewer, but at least one, spreads its pods over waves of
// at most what it allows: the drain evicts a wave, waits until the budget
// allows the next, and goes on. The reservation is the largest number of a
// budget's pods in one wave, as that is the most the node's drain disrupts at
// once; later nodes of the plan have the rest. Pods covered by no budget go in
// the first wave; a pod covered by several goes in the first wave in which each
// of them has room.
//
// order, when set, also orders the waves: the pods it marks go in a later wave
// than every one of its first lead pods (a consolidation's pods that need
// the room its displaced pods leave; see run.makeRoom).
//
// take returns what it reserved, or, when a budget allows nothing more (or,
// with oneWave, fewer than the node needs at once), reserves nothing and says
// which pod's budget fell short and why.
func (b *budgets) take(covers [][]*budget, order *after) draw {
	need := map[*budget]int32{}
	first := map[*budget]int{}
	var seen []*budget
	for i, c := range covers {
		for _, bud := range c {
			if _, ok := need[bud]; !ok {
				seen = append(seen, bud)
				first[bud] = i
			}
			need[bud]++
		}
	}
	// per is what each budget lets the node disrupt at once.
	per := make(map[*budget]int32, len(need))
	spread := false
	for _, bud := range seen {
		left := bud.allowed - bud.used
		if left <= 0 {
			return draw{blocked: first[bud], reason: bud.exhausted()}
		}
		if b.oneWave && need[bud] > left {
			return draw{blocked: first[bud], needsWaves: true, reason: fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruption(s) at a time, the node needs %d: it drains in waves",
				bud.pdb.Namespace, bud.pdb.Name, left, need[bud])}
		}
		per[bud] = min(need[bud], left)
		spread = spread || need[bud] > left
	}
	waves := make([]int32, len(covers))
	for i := range waves {
		waves[i] = 1
	}
	if spread || order != nil {
		assignWaves(covers, per, waves, order)
	}
	for bud, n := range per {
		bud.used += n
	}
	return draw{taken: per, waves: waves, blocked: -1}
}

// draw is what take reserved for a node: the disruptions taken from each
// budget and each pod's wave; or, when blocked is a pod's index, nothing, and
// the reason. needsWaves says the node was refused only because, with
// oneWave, it would need waves.
type draw struct {
	taken      map[*budget]int32
	waves      []int32
	blocked    int
	reason     string
	needsWaves bool
}

// exhausted says why a budget lets no more pods go in this plan.
func (bud *budget) exhausted() string {
	name := bud.pdb.Namespace + "/" + bud.pdb.Name
	switch {
	case bud.why != "":
		return fmt.Sprintf("PodDisruptionBudget %s allows no disruption (%s)", name, bud.why)
	case bud.allowed <= 0:
		return fmt.Sprintf("PodDisruptionBudget %s allows no disruption now (status.disruptionsAllowed is %d)", name, bud.allowed)
	}
	return fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s) at a time, all taken by the drains of other nodes in this plan", name, bud.allowed)
}

// after says which pods of a draw go in a later wave than every one of its
// first lead pods.
type after struct {
	lead   int
	follow []bool
}

// assignWaves puts each pod, in order, in the first wave in which every budget
// covering it has had fewer of its pods than it allows at once (per), and,
// for the pods order marks, that comes after the waves of its lead pods.
func assignWaves(covers [][]*budget, per map[*budget]int32, waves []int32, order *after) {
	// inWave[bud][w-1] counts the budget's pods in wave w.
	inWave := make(map[*budget][]int32, len(per))
	// last is the latest wave of the lead pods.
	last := int32(0)
	for i, c := range covers {
		w := int32(1)
		if order != nil && i >= order.lead && order.follow[i] {
			w = last + 1
		}
		for {
			free := true
			for _, bud := range c {
				if n := inWave[bud]; int(w) <= len(n) && n[w-1] >= per[bud] {
					free = false
					break
				}
			}
			if free {
				break
			}
			w++
		}
		waves[i] = w
		if order != nil && i < order.lead {
			last = max(last, w)
		}
		for _, bud := range c {
			for len(inWave[bud]) < int(w) {
				inWave[bud] = append(inWave[bud], 0)
			}
			inWave[bud][w-1]++
		}
	}
}

// give returns the disruptions take reserved.
func (b *budgets) give(taken map[*budget]int32) {
	for bud, n := range taken {
		bud.used -= n
	}
}
