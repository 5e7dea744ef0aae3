package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeOption changes a node under construction.
type NodeOption func(*corev1.Node)

// Node returns a Ready node with 4 CPU, 16Gi memory and room for 110 pods,
// changed by opts.
func Node(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), Labels: map[string]string{
			"kubernetes.io/hostname": name,
		}, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	Capacity("4", "16Gi")(n)
	for _, o := range opts {
		o(n)
	}
	return n
}

// Capacity sets the node's capacity and allocatable CPU and memory (110 pods).
func Capacity(cpu, memory string) NodeOption {
	return func(n *corev1.Node) {
		rl := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		n.Status.Capacity, n.Status.Allocatable = rl, rl.DeepCopy()
	}
}

// NodeLabel sets a label.
func NodeLabel(k, v string) NodeOption { return func(n *corev1.Node) { n.Labels[k] = v } }

// Spot labels the node karpenter.sh/capacity-type=spot.
func Spot() NodeOption { return NodeLabel("karpenter.sh/capacity-type", "spot") }

// OnDemand labels the node karpenter.sh/capacity-type=on-demand.
func OnDemand() NodeOption { return NodeLabel("karpenter.sh/capacity-type", "on-demand") }

// Zone sets topology.kubernetes.io/zone.
func Zone(z string) NodeOption { return NodeLabel("topology.kubernetes.io/zone", z) }

// Taint adds a taint.
func Taint(key, value string, effect corev1.TaintEffect) NodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// Cordoned marks the node unschedulable.
func Cordoned() NodeOption { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }
