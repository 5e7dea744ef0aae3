package lab

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeClass is the kind of capacity a lab node stands for.
type NodeClass string

// Node classes. The labels they set are the ones Karpenter writes, which
// Spotter's classification reads.
const (
	ClassSpot         NodeClass = "spot"
	ClassOnDemand     NodeClass = "on-demand"
	ClassControlPlane NodeClass = "control-plane"
)

// Well-known label and taint keys used for lab nodes.
const (
	CapacityTypeLabel = "karpenter.sh/capacity-type"
	ZoneLabel         = "topology.kubernetes.io/zone"
	ControlPlaneRole  = "node-role.kubernetes.io/control-plane"
	InstanceTypeLabel = "node.kubernetes.io/instance-type"
)

// NodeSpec describes a kwok node. Zero fields take the defaults of Node.
type NodeSpec struct {
	Name   string
	Class  NodeClass
	CPU    string // default "8"
	Memory string // default "32Gi"
	Pods   string // default "110"
	Zone   string // default "zone-a"
	// InstanceType sets node.kubernetes.io/instance-type. Default "lab.large".
	InstanceType string
	Labels       map[string]string
	Taints       []corev1.Taint
	// ProviderID sets spec.providerID (the node agent reads the Azure VM name
	// from it).
	ProviderID string
}

// Node returns the Node object for spec: managed by the lab's kwok, with its
// class's labels (and, for the control plane, its NoSchedule taint), capacity and
// zone.
func Node(spec NodeSpec) *corev1.Node {
	def := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	labels := map[string]string{
		"kubernetes.io/hostname": spec.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
		ZoneLabel:                def(spec.Zone, "zone-a"),
		InstanceTypeLabel:        def(spec.InstanceType, "lab.large"),
	}
	taints := append([]corev1.Taint(nil), spec.Taints...)
	switch spec.Class {
	case ClassSpot, ClassOnDemand:
		labels[CapacityTypeLabel] = string(spec.Class)
	case ClassControlPlane:
		labels[ControlPlaneRole] = ""
		taints = append(taints, corev1.Taint{Key: ControlPlaneRole, Effect: corev1.TaintEffectNoSchedule})
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(def(spec.CPU, "8")),
		corev1.ResourceMemory: resource.MustParse(def(spec.Memory, "32Gi")),
		corev1.ResourcePods:   resource.MustParse(def(spec.Pods, "110")),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: taints, ProviderID: spec.ProviderID},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
		},
	}
}

// CreateNodes creates kwok nodes; kwok makes them Ready within a second or so.
func CreateNodes(ctx context.Context, client kubernetes.Interface, specs ...NodeSpec) error {
	for _, s := range specs {
		if _, err := client.CoreV1().Nodes().Create(ctx, Node(s), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
	}
	return nil
}
