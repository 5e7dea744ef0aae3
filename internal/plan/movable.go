package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod annotations (and, for Spotter's own, labels) that decide whether a pod may
// be moved.
const (
	DoNotMoveKey            = "spotter.dev/do-not-move"
	KarpenterDoNotDisrupt   = "karpenter.sh/do-not-disrupt"
	SafeToEvictAnnotation   = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	SafeToEvictLocalVolumes = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	mirrorPodAnnotation     = corev1.MirrorPodAnnotationKey
	daemonSetKind           = "DaemonSet"
	reasonDaemonSet         = "DaemonSet pod: stays with its node"
	reasonMirror            = "static pod: stays with its node"
	reasonTerminating       = "terminating: waited for, not moved"
	reasonNoController      = "no controller owns it, so nothing would recreate it (annotate %s=true or set planner.allowUnreplicatedPods)"
	reasonLocalStorage      = "local storage in volume %q would be lost (annotate %s=true or set planner.allowLocalStorage)"
	reasonOptOutAnnotation  = "annotation %s=%s"
	reasonOptOutLabel       = "label %s=%s"
	reasonTerminalPodFormat = "%s pod: uses no capacity"
)

// Action is what a plan does with a pod on a node it wants to empty.
type Action int

// Actions, from the mildest.
const (
	// Ignore: the pod stays with the node or has ended (DaemonSet, static and
	// terminal pods); it uses no capacity elsewhere.
	Ignore Action = iota
	// Wait: the pod is terminating already; the drain waits for it.
	Wait
	// Move: the pod is evicted and must fit elsewhere.
	Move
	// Block: the pod must not be disrupted; its node cannot be emptied.
	Block
)

// Movability is the verdict for one pod.
type Movability struct {
	Action Action
	// Reason explains Ignore, Wait and Block.
	Reason string
}

// Rules are the configurable movability rules.
type Rules struct {
	// AllowUnreplicated lets pods without a controller be moved (deleted).
	AllowUnreplicated bool
	// AllowLocalStorage lets pods with emptyDir or hostPath volumes be moved.
	AllowLocalStorage bool
}

// Check returns the verdict for pod, in this order: terminal, static and
// DaemonSet pods are ignored; terminating pods are waited for; opt-out
// annotations block; then pods without a controller and pods with local
// storage block unless annotated safe-to-evict=true or allowed by the rules.
func (r Rules) Check(pod *corev1.Pod) Movability {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return Movability{Ignore, fmt.Sprintf(reasonTerminalPodFormat, pod.Status.Phase)}
	}
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		return Movability{Ignore, reasonMirror}
	}
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner != nil && owner.Kind == daemonSetKind {
		return Movability{Ignore, reasonDaemonSet}
	}
	if pod.DeletionTimestamp != nil {
		return Movability{Wait, reasonTerminating}
	}
	if pod.Annotations[DoNotMoveKey] == "true" {
		return Movability{Block, fmt.Sprintf(reasonOptOutAnnotation, DoNotMoveKey, "true")}
	}
	if pod.Labels[DoNotMoveKey] == "true" {
		return Movability{Block, fmt.Sprintf(reasonOptOutLabel, DoNotMoveKey, "true")}
	}
	if pod.Annotations[KarpenterDoNotDisrupt] == "true" {
		return Movability{Block, fmt.Sprintf(reasonOptOutAnnotation, KarpenterDoNotDisrupt, "true")}
	}
	safe := pod.Annotations[SafeToEvictAnnotation]
	if safe == "false" {
		return Movability{Block, fmt.Sprintf(reasonOptOutAnnotation, SafeToEvictAnnotation, "false")}
	}
	if safe == "true" {
		return Movability{Action: Move}
	}
	if owner == nil && !r.AllowUnreplicated {
		return Movability{Block, fmt.Sprintf(reasonNoController, SafeToEvictAnnotation)}
	}
	if !r.AllowLocalStorage {
		if v := localVolume(pod); v != "" {
			return Movability{Block, fmt.Sprintf(reasonLocalStorage, v, SafeToEvictAnnotation)}
		}
	}
	return Movability{Action: Move}
}

// localVolume returns the first volume of pod whose data lives on the node
// (hostPath, or emptyDir not backed by memory) and that the pod does not list
// in the safe-to-evict-local-volumes annotation.
func localVolume(pod *corev1.Pod) string {
	allowed := map[string]bool{}
	for _, name := range strings.Split(pod.Annotations[SafeToEvictLocalVolumes], ",") {
		if name = strings.TrimSpace(name); name != "" {
			allowed[name] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory)
		if local && !allowed[v.Name] {
			return v.Name
		}
	}
	return ""
}
