package plan

import (
	"bytes"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// template is a set of pods that the fit check cannot tell apart: pods with
// the same controller, namespace, labels and spec (the bound node aside), and
// plain requests (see plainRequests). The scheduler plugins read nothing else
// of a pod, so what they answer for one pod of a template they answer for
// all of them: the plan computes the static fit (see staticFit) and the
// PreFilter state (see fitter.cycleFor) once per template.
type template struct {
	static *staticFit
	cycle  *cachedCycle
}

// templates finds the template of a pod within one plan.
type templates struct {
	// byRep holds this plan's template of each representative pod (see
	// shapes).
	byRep map[*corev1.Pod]*template
	// byPod memoizes the answer per pod object; nil when a pod has none.
	byPod map[*corev1.Pod]*template
	// prev is what earlier plans learnt (read only, nil at first); next
	// is what this one learns, for the plan after it.
	prev, next *shapes
	// buf holds the encoded spec of the pod being matched.
	buf []byte
}

// shapes remembers, from one plan to the next, which pods share a template.
// A pod's UID and resourceVersion name one content (every update of a pod
// gets a new resourceVersion), so comparing specs, the costly part of finding
// a template, is done once per version of a pod instead of once per plan.
// Pods without both (built by hand, not read from an API) are compared in
// every plan. What a template holds (the static fit, the PreFilter state)
// depends on the nodes and is computed again by each plan.
type shapes struct {
	// rep is each pod version's representative: the first pod seen with
	// the same template; nil for a pod with none.
	rep map[podVersion]*corev1.Pod
	// byOwner lists the representatives of each controller's pods.
	byOwner map[types.UID][]*corev1.Pod
	// spec holds each representative's spec, node left out, protobuf
	// encoded (see encodeSpec).
	spec map[*corev1.Pod][]byte
}

func newShapes(n int) *shapes {
	return &shapes{rep: make(map[podVersion]*corev1.Pod, n), byOwner: map[types.UID][]*corev1.Pod{}, spec: map[*corev1.Pod][]byte{}}
}

// podVersion names one content of a pod.
type podVersion struct {
	uid             types.UID
	resourceVersion string
}

// newTemplates starts a plan's templates from what the plans before it
// learnt (prev, may be nil); n is about how many pods it will see.
func newTemplates(prev *shapes, n int) *templates {
	return &templates{byRep: map[*corev1.Pod]*template{}, byPod: map[*corev1.Pod]*template{}, prev: prev, next: newShapes(n)}
}

// of returns the template of pod, or nil for a pod that shares it with no
// other (no controller, or resources being resized).
func (ts *templates) of(pod *corev1.Pod) *template {
	if t, ok := ts.byPod[pod]; ok {
		return t
	}
	v := podVersion{pod.UID, pod.ResourceVersion}
	versioned := v.uid != "" && v.resourceVersion != ""
	rep, known := (*corev1.Pod)(nil), false
	if ts.prev != nil && versioned {
		rep, known = ts.prev.rep[v]
	}
	var owner *metav1.OwnerReference
	if rep != nil || !known {
		owner = metav1.GetControllerOfNoCopy(pod)
	}
	if !known {
		rep = ts.representative(pod, owner)
	}
	if versioned {
		ts.next.rep[v] = rep
	}
	var t *template
	if rep != nil {
		t = ts.byRep[rep]
		if t == nil {
			t = &template{}
			ts.byRep[rep] = t
			ts.next.byOwner[owner.UID] = append(ts.next.byOwner[owner.UID], rep)
			ts.next.spec[rep] = ts.specOf(rep)
		}
	}
	ts.byPod[pod] = t
	return t
}

// representative finds the pod whose template pod shares, among the
// representatives this plan and the ones before it have seen, and returns a
// copy of pod when it is the first of its kind; nil when it has no template.
func (ts *templates) representative(pod *corev1.Pod, owner *metav1.OwnerReference) *corev1.Pod {
	if owner == nil || !plainRequests(pod) || resizing(pod) {
		return nil
	}
	spec, ok := encodeSpec(pod, ts.buf)
	if !ok {
		return nil
	}
	ts.buf = spec
	candidates := ts.next.byOwner[owner.UID]
	if ts.prev != nil {
		candidates = append(slices.Clip(candidates), ts.prev.byOwner[owner.UID]...)
	}
	for _, c := range candidates {
		if c.Namespace == pod.Namespace && maps.Equal(c.Labels, pod.Labels) && bytes.Equal(ts.specOf(c), spec) {
			return c
		}
	}
	// A copy: the pod may be an element of a list's items, which a
	// pointer into it would keep whole for as long as the plans remember
	// the representative.
	c := *pod
	ts.next.spec[&c] = bytes.Clone(spec)
	return &c
}

// specOf returns the encoded spec of a representative.
func (ts *templates) specOf(rep *corev1.Pod) []byte {
	if b, ok := ts.next.spec[rep]; ok {
		return b
	}
	if ts.prev != nil {
		if b, ok := ts.prev.spec[rep]; ok {
			return b
		}
	}
	b, _ := encodeSpec(rep, nil)
	return b
}

// encodeSpec encodes the pod's spec, its node left out, into buf (grown as
// needed): the pods of a controller with plain requests and the same
// namespace, labels and encoded spec look the same to the scheduler plugins,
// which read nothing else of a pod. The protobuf encoding holds every field
// of the spec and writes maps in key order, so equal encodings are equal
// specs; equal specs may encode differently only where a quantity is written
// in two forms (1000m and 1), and then they are two templates, which costs
// time, never an answer. Comparing encodings is about ten times as fast as
// equality.Semantic.DeepEqual on the specs.
func encodeSpec(pod *corev1.Pod, buf []byte) ([]byte, bool) {
	spec := pod.Spec
	spec.NodeName = ""
	n := spec.Size()
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := spec.MarshalToSizedBuffer(buf); err != nil {
		return nil, false
	}
	return buf, true
}

// resizing reports whether an in-place resize of the pod is pending or in
// progress, which some plugins look at.
func resizing(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			return true
		}
	}
	return false
}
