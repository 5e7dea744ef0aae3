package plan

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	pod    *corev1.Pod
	static *staticFit
	cycle  *cachedCycle
}

// templates finds the template of a pod.
type templates struct {
	byOwner map[types.UID][]*template
	// byPod memoizes the answer per pod object; nil when a pod has none.
	byPod map[*corev1.Pod]*template
}

func newTemplates() *templates {
	return &templates{byOwner: map[types.UID][]*template{}, byPod: map[*corev1.Pod]*template{}}
}

// of returns the template of pod, or nil for a pod that shares it with no
// other (no controller, or resources being resized).
func (ts *templates) of(pod *corev1.Pod) *template {
	if t, ok := ts.byPod[pod]; ok {
		return t
	}
	var t *template
	if owner := metav1.GetControllerOfNoCopy(pod); owner != nil && plainRequests(pod) && !resizing(pod) {
		for _, c := range ts.byOwner[owner.UID] {
			if sameTemplate(c.pod, pod) {
				t = c
				break
			}
		}
		if t == nil {
			t = &template{pod: pod}
			ts.byOwner[owner.UID] = append(ts.byOwner[owner.UID], t)
		}
	}
	ts.byPod[pod] = t
	return t
}

// sameTemplate reports whether two pods with plain requests look the same to
// the scheduler plugins.
func sameTemplate(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace || !maps.Equal(a.Labels, b.Labels) {
		return false
	}
	sa, sb := a.Spec, b.Spec
	sa.NodeName, sb.NodeName = "", ""
	return equality.Semantic.DeepEqual(&sa, &sb)
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
