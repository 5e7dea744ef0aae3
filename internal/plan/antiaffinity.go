package plan

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"
)

// antiAffinityIndex counts the required anti-affinity terms of the pods in the
// snapshot, deduplicated, so that "does any existing pod's anti-affinity match
// this pod?" costs one check per distinct term instead of one per pod.
type antiAffinityIndex struct {
	// terms holds every term by the namespaces it applies to (a term with a
	// namespace selector is kept under "" and checked for every pod) and by a
	// label its selector requires (pods without it cannot match), or under no
	// label when it requires none.
	terms map[termBucket]map[string]*countedTerm
	// crossNamespace holds the terms of pods whose anti-affinity may reach
	// pods of other namespaces (explicit namespaces or a namespace selector).
	crossNamespace map[string]*countedTerm
}

// termBucket is where antiAffinityIndex keeps a term: the namespace it applies
// to and a label (key and value) its selector requires.
type termBucket struct{ namespace, key, value string }

type countedTerm struct {
	term  fwk.AffinityTerm
	count int
	// pods are the pods with the term (in the namespace buckets only).
	pods []fwk.PodInfo
}

func newAntiAffinityIndex(pods []fwk.PodInfo) *antiAffinityIndex {
	idx := &antiAffinityIndex{terms: map[termBucket]map[string]*countedTerm{}, crossNamespace: map[string]*countedTerm{}}
	for _, pi := range pods {
		idx.add(pi, 1)
	}
	return idx
}

// add counts (delta 1) or uncounts (delta -1) a pod's required anti-affinity
// terms.
func (idx *antiAffinityIndex) add(pi fwk.PodInfo, delta int) {
	terms := pi.GetRequiredAntiAffinityTerms()
	if len(terms) == 0 {
		return
	}
	cross := !ownNamespaceOnly(pi.GetPod())
	for _, t := range terms {
		key := termKey(t)
		required, _ := requiredLabel(t.Selector)
		for _, ns := range termNamespaces(t) {
			b := termBucket{ns, required.key, required.value}
			bucket, ok := idx.terms[b]
			if !ok {
				bucket = map[string]*countedTerm{}
				idx.terms[b] = bucket
			}
			count(bucket, key, t, delta, pi)
		}
		if cross {
			count(idx.crossNamespace, key, t, delta, nil)
		}
	}
}

func count(m map[string]*countedTerm, key string, t fwk.AffinityTerm, delta int, pi fwk.PodInfo) {
	ct, ok := m[key]
	if !ok {
		ct = &countedTerm{term: t}
		m[key] = ct
	}
	ct.count += delta
	if ct.count <= 0 {
		delete(m, key)
		return
	}
	if pi == nil {
		return
	}
	if delta > 0 {
		ct.pods = append(ct.pods, pi)
		return
	}
	uid := pi.GetPod().UID
	ct.pods = slices.DeleteFunc(ct.pods, func(p fwk.PodInfo) bool { return p.GetPod().UID == uid })
}

// matching returns the counted terms that match pod.
func (idx *antiAffinityIndex) matching(pod *corev1.Pod, nsLabels labels.Set) []*countedTerm {
	var out []*countedTerm
	idx.candidates(pod, func(bucket map[string]*countedTerm) bool {
		for _, ct := range bucket {
			if ct.term.Matches(pod, nsLabels) {
				out = append(out, ct)
			}
		}
		return true
	})
	return out
}

// candidates calls visit with each bucket whose terms may match pod, until it
// returns false.
func (idx *antiAffinityIndex) candidates(pod *corev1.Pod, visit func(map[string]*countedTerm) bool) {
	for _, ns := range [2]string{pod.Namespace, ""} {
		if bucket, ok := idx.terms[termBucket{namespace: ns}]; ok && !visit(bucket) {
			return
		}
		for k, v := range pod.Labels {
			if bucket, ok := idx.terms[termBucket{ns, k, v}]; ok && !visit(bucket) {
				return
			}
		}
	}
}

// matches reports whether any counted term matches pod, with the scheduler's
// own AffinityTerm.Matches.
func (idx *antiAffinityIndex) matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	found := false
	idx.candidates(pod, func(bucket map[string]*countedTerm) bool {
		found = anyMatches(bucket, pod, nsLabels)
		return !found
	})
	return found
}

// termNamespaces lists the index buckets of a term: its namespaces, and "" when
// its namespace selector may select any namespace.
func termNamespaces(t fwk.AffinityTerm) []string {
	out := make([]string, 0, len(t.Namespaces)+1)
	for ns := range t.Namespaces {
		out = append(out, ns)
	}
	if t.NamespaceSelector != nil {
		// labels.Nothing(), what the scheduler parses an absent selector to, is
		// the only selector that reports itself as not selectable.
		if _, selectable := t.NamespaceSelector.Requirements(); selectable {
			out = append(out, "")
		}
	}
	return out
}

// matchesCrossNamespace is matches for the terms that may reach across
// namespaces.
func (idx *antiAffinityIndex) matchesCrossNamespace(pod *corev1.Pod, nsLabels labels.Set) bool {
	return anyMatches(idx.crossNamespace, pod, nsLabels)
}

func anyMatches(terms map[string]*countedTerm, pod *corev1.Pod, nsLabels labels.Set) bool {
	for _, ct := range terms {
		if ct.term.Matches(pod, nsLabels) {
			return true
		}
	}
	return false
}

func termKey(t fwk.AffinityTerm) string {
	ns := make([]string, 0, len(t.Namespaces))
	for n := range t.Namespaces {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, ",") + "|" + selectorKey(t.NamespaceSelector) + "|" + selectorKey(t.Selector) + "|" + t.TopologyKey
}

// selectorKey renders a selector for termKey: labels.Nothing() and
// labels.Everything() both print as "".
func selectorKey(sel labels.Selector) string {
	if sel == nil {
		return "nil"
	}
	if _, selectable := sel.Requirements(); !selectable {
		return "nothing"
	}
	return "sel:" + sel.String()
}
