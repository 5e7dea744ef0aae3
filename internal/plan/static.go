package plan

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// staticPlugins are the Filter plugins whose answer for a pod depends on the
// pod and the Node object only (its unschedulable flag, taints, labels and
// name), never on the pods of the node or of the cluster. The plan asks them
// once per template and class of spot nodes (see nodeClasses) before it runs
// the others, which see the committed placements.
var staticPlugins = []string{names.NodeUnschedulable, names.NodeName, names.TaintToleration, names.NodeAffinity}

// hostnameLabel is the label that names a node; node classes leave it out.
const hostnameLabel = corev1.LabelHostname

// staticFit is what the static plugins answer for a pod on the spot nodes.
type staticFit struct {
	// feasible are the groups of spot nodes they accept (indexes into
	// run.spot; see nodeClasses).
	feasible [][]int
	// classes are the indexes in run.classes of the groups in feasible, when
	// the groups are classes; nil when they are single nodes.
	classes []int
	// rejected counts the others by reason.
	rejected map[string]int
}

// nodeClasses groups spot nodes (indexes into spot) that the static plugins
// cannot tell apart for a pod that names no node: equal unschedulable flags,
// taints and labels, the hostname label aside.
func nodeClasses(spot []*corev1.Node) [][]int {
	var out [][]int
	index := map[string]int{}
	for i, n := range spot {
		key := classKey(n)
		c, ok := index[key]
		if !ok {
			c = len(out)
			index[key] = c
			out = append(out, nil)
		}
		out[c] = append(out[c], i)
	}
	return out
}

func classKey(n *corev1.Node) string {
	var b strings.Builder
	if n.Spec.Unschedulable {
		b.WriteString("unschedulable\x00")
	}
	for _, t := range n.Spec.Taints {
		b.WriteString(t.Key + "=" + t.Value + ":" + string(t.Effect) + "\x00")
	}
	b.WriteString("\x01")
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		if k != hostnameLabel {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + n.Labels[k] + "\x00")
	}
	return b.String()
}

// namesNodes reports whether the static plugins' answer for pod may differ
// between nodes of one class: it is bound to a node, or its node selector or
// required node affinity reads the hostname label or the node's name.
func namesNodes(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return true
	}
	if _, ok := pod.Spec.NodeSelector[hostnameLabel]; ok {
		return true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchFields) > 0 {
			return true
		}
		for _, e := range term.MatchExpressions {
			if e.Key == hostnameLabel {
				return true
			}
		}
	}
	return false
}

// staticFit returns the static plugins' answer for pod, a pod of template t
// (nil when it has none), computed once per template. The pod is asked about
// as a replacement: its spec.nodeName is ignored.
func (r *run) staticFit(ctx context.Context, pod *corev1.Pod, t *template) *staticFit {
	if t != nil && t.static != nil {
		return t.static
	}
	st := &staticFit{rejected: map[string]int{}}
	if r.exhaustive {
		st.feasible = [][]int{make([]int, len(r.spot))}
		for i := range r.spot {
			st.feasible[0][i] = i
		}
		return st
	}
	if t != nil {
		t.static = st
	}
	if pod.Spec.NodeName != "" {
		replacement := *pod
		replacement.Spec.NodeName = ""
		pod = &replacement
	}
	state := framework.NewCycleState()
	result, status, _ := r.fit.static.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		st.rejected[describe(status)] = len(r.spot)
		return st
	}
	classes, byClass := r.classes, true
	if namesNodes(pod) || (result != nil && result.NodeNames != nil) {
		classes, byClass = r.singles, false
	}
	if byClass {
		st.classes = []int{}
	}
	for c, members := range classes {
		rep := members[0]
		if result != nil && result.NodeNames != nil && !result.NodeNames.Has(r.spot[rep]) {
			st.rejected[reasonNodeNames] += len(members)
			continue
		}
		if s := r.fit.static.RunFilterPlugins(ctx, state, pod, r.spotInfo[rep]); !s.IsSuccess() {
			st.rejected[describe(s)] += len(members)
			continue
		}
		st.feasible = append(st.feasible, members)
		if byClass {
			st.classes = append(st.classes, c)
		}
	}
	return st
}

// reasonNodeNames is the reason for a node that PreFilter ruled out.
const reasonNodeNames = "NodeAffinity: node(s) didn't match Pod's node affinity/selector"
