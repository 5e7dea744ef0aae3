package cloud

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Taints that belong to one node's moment, not to its group: a template
// copied from a live node drops them (TemplateFromNode).
const (
	// interruptionTaint is the agent's taint on a node whose instance
	// received a notice (internal/agent/interrupt.TaintKey).
	interruptionTaint = "spotter.dev/interruption"
	// drainingTaint is the drain engine's taint on a node it drains
	// (internal/drain.DrainingTaintKey).
	drainingTaint = "spotter.dev/draining"
)

// NodeSpecificTaint reports whether a taint says something of one node
// rather than of its group, so that a new node of the group will not carry
// it: the kubelet's and node lifecycle controller's conditions
// (node.kubernetes.io/...), the cloud node controller's
// (node.cloudprovider.kubernetes.io/...), the cluster autoscaler's scale-down
// marks, and Spotter's own interruption and draining taints. The cluster
// autoscaler drops the same ones when it copies a node
// (cluster-autoscaler/utils/taints: SanitizeTaints).
func NodeSpecificTaint(t corev1.Taint) bool {
	switch {
	case strings.HasPrefix(t.Key, "node.kubernetes.io/"), strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/"):
		return true
	}
	switch t.Key {
	case "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler", interruptionTaint, drainingTaint:
		return true
	}
	return false
}

// TemplateFromNode returns what a new node of a group will look like, copied
// from live, one of the group's Nodes, and named name: its labels (with
// kubernetes.io/hostname set to name), taints (without the node-specific
// ones, NodeSpecificTaint), capacity and allocatable, extended resources such
// as nvidia.com/gpu among them, and a Ready condition. This is how the
// cluster autoscaler builds a group's template when the group has a node,
// and it is exact where a template read from the cloud is an estimate: max
// pods, kube-reserved and the device plugins' resources are what the kubelet
// reports. An extended resource the node has but does not yet offer (a device
// plugin still starting: allocatable 0 of a capacity above 0) counts at its
// capacity.
func TemplateFromNode(live *corev1.Node, name string) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: make(map[string]string, len(live.Labels)+1)}}
	for k, v := range live.Labels {
		out.Labels[k] = v
	}
	out.Labels[corev1.LabelHostname] = name
	for _, t := range live.Spec.Taints {
		if !NodeSpecificTaint(t) {
			out.Spec.Taints = append(out.Spec.Taints, t)
		}
	}
	out.Status.Capacity = live.Status.Capacity.DeepCopy()
	out.Status.Allocatable = live.Status.Allocatable.DeepCopy()
	if len(out.Status.Allocatable) == 0 {
		out.Status.Allocatable = out.Status.Capacity.DeepCopy()
	}
	for r, c := range out.Status.Capacity {
		if !extendedResource(r) {
			continue
		}
		if a, ok := out.Status.Allocatable[r]; (!ok || a.IsZero()) && c.Sign() > 0 {
			out.Status.Allocatable[r] = c.DeepCopy()
		}
	}
	out.Status.NodeInfo.Architecture = live.Status.NodeInfo.Architecture
	out.Status.NodeInfo.OperatingSystem = live.Status.NodeInfo.OperatingSystem
	out.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return out
}

// extendedResource reports whether r is offered by a device plugin or an
// operator rather than measured by the kubelet (a name with a domain outside
// kubernetes.io, such as nvidia.com/gpu).
func extendedResource(r corev1.ResourceName) bool {
	s := string(r)
	return strings.Contains(s, "/") && !strings.HasPrefix(s, "kubernetes.io/") && !strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}

// LiveCandidate reports whether node can serve as its group's template: it
// is Ready, schedulable and not being deleted. A node on its way out, or one
// not yet ready, may miss what its group gives every node (a device plugin's
// resources, a late label).
func LiveCandidate(node *corev1.Node) bool {
	if node.DeletionTimestamp != nil || node.Spec.Unschedulable {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NvidiaGPU is the resource name of NVIDIA's device plugin, which a template
// built from the cloud's description of an instance type gives its GPUs
// (the cluster autoscaler's providers do the same).
const NvidiaGPU corev1.ResourceName = "nvidia.com/gpu"

// Quantities for template builders.

// MiB is a memory quantity of n mebibytes.
func MiB(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }

// Milli is a CPU quantity of n millicores.
func Milli(n int64) resource.Quantity { return *resource.NewMilliQuantity(n, resource.DecimalSI) }
