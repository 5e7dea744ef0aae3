// Package testutil builds Kubernetes objects for tests, with options:
//
//	testutil.Pod("p", testutil.OnNode("n1"), testutil.CPU("500m"))
package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodOption changes a pod under construction.
type PodOption func(*corev1.Pod)

// Pod returns a pod in namespace "default" with one container (kwok runs
// nothing, so the image is only a name), changed by opts.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "pause"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// InNamespace sets the namespace.
func InNamespace(ns string) PodOption { return func(p *corev1.Pod) { p.Namespace = ns } }

// OnNode binds the pod to a node, bypassing the scheduler.
func OnNode(node string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// WithLabels adds labels.
func WithLabels(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// CPU sets the CPU request of the first container.
func CPU(q string) PodOption { return request(corev1.ResourceCPU, q) }

// Memory sets the memory request of the first container.
func Memory(q string) PodOption { return request(corev1.ResourceMemory, q) }

func request(name corev1.ResourceName, q string) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = resource.MustParse(q)
	}
}

// GracePeriod sets terminationGracePeriodSeconds.
func GracePeriod(seconds int64) PodOption {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &seconds }
}

// RunningReady is the status of a pod whose containers run and pass readiness.
func RunningReady() corev1.PodStatus {
	now := metav1.Now()
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
}
