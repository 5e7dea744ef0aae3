package gencluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels and taint of the generated nodes. The capacity-type label is
// Karpenter's, the one Spotter's classifier reads by default.
const (
	labelHostname     = "kubernetes.io/hostname"
	labelZone         = "topology.kubernetes.io/zone"
	labelRegion       = "topology.kubernetes.io/region"
	labelCapacityType = "karpenter.sh/capacity-type"
	labelInstanceType = "node.kubernetes.io/instance-type"

	spotTaintKey   = "spot"
	spotTaintValue = "true"

	region       = "synthetic-1"
	instanceType = "synthetic.8x32"
	// podImage is the pause image: the pods never run.
	podImage = "pause:3.10"
)

// created is every object's creation time, and every condition's.
var created = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func (w *workload) name() string      { return fmt.Sprintf("app-%05d", w.index) }
func (w *workload) namespace() string { return fmt.Sprintf("team-%02d", w.team) }

func (c *Cluster) nodeObject(i int) *corev1.Node {
	n := &c.nodes[i]
	name := nodeName(i)
	capacityType := "on-demand"
	var taints []corev1.Taint
	if n.spot {
		capacityType = "spot"
		taints = []corev1.Taint{{Key: spotTaintKey, Value: spotTaintValue, Effect: corev1.TaintEffectNoSchedule}}
	}
	allocatable := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(nodeMilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(nodeMemory, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(nodeMaxPods, resource.DecimalSI),
	}
	obj := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
	}
	obj.Name = name
	obj.UID = n.uid
	obj.CreationTimestamp = created
	obj.Labels = map[string]string{
		labelHostname:        name,
		labelZone:            zoneNames[n.zone],
		labelRegion:          region,
		labelCapacityType:    capacityType,
		labelInstanceType:    instanceType,
		"kubernetes.io/os":   "linux",
		"kubernetes.io/arch": "amd64",
	}
	obj.Spec.ProviderID = "synthetic://" + name
	obj.Spec.Taints = taints
	obj.Status.Capacity = allocatable
	obj.Status.Allocatable = allocatable.DeepCopy()
	obj.Status.Conditions = []corev1.NodeCondition{{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		LastHeartbeatTime:  created,
		LastTransitionTime: created,
	}}
	return obj
}

func (c *Cluster) podObject(w *workload, p *pod) *corev1.Pod {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name()}}
	rsName := w.name() + "-" + w.hash
	yes := true
	obj := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	obj.Name = rsName + "-" + p.suffix
	obj.Namespace = w.namespace()
	obj.UID = p.uid
	obj.CreationTimestamp = created
	obj.Labels = map[string]string{"app": w.name(), "pod-template-hash": w.hash}
	obj.OwnerReferences = []metav1.OwnerReference{{
		APIVersion:         "apps/v1",
		Kind:               "ReplicaSet",
		Name:               rsName,
		UID:                w.rsUID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}}

	spec := &obj.Spec
	spec.NodeName = nodeName(p.node)
	spec.SchedulerName = corev1.DefaultSchedulerName
	spec.Containers = []corev1.Container{{
		Name:  "app",
		Image: podImage,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(w.req.milliCPU, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(w.req.bytes(), resource.BinarySI),
		}},
	}}
	if w.tolerates {
		spec.Tolerations = []corev1.Toleration{{
			Key:      spotTaintKey,
			Operator: corev1.TolerationOpEqual,
			Value:    spotTaintValue,
			Effect:   corev1.TaintEffectNoSchedule,
		}}
	}
	if w.antiAffinity {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: selector, TopologyKey: labelHostname},
			},
		}}
	}
	if w.zoneSpread {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       labelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     selector,
		}}
	}

	obj.Status = corev1.PodStatus{
		Phase:    corev1.PodRunning,
		QOSClass: corev1.PodQOSBurstable, // requests without limits
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
		},
		StartTime: &created,
	}
	return obj
}

func (c *Cluster) pdbObject(w *workload) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	pods := int32(len(w.pods))
	obj := &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
	}
	obj.Name = w.name()
	obj.Namespace = w.namespace()
	obj.UID = w.pdbUID
	obj.CreationTimestamp = created
	obj.Generation = 1
	obj.Spec.MaxUnavailable = &maxUnavailable
	obj.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name()}}
	// Every pod is Ready, so maxUnavailable 1 leaves one disruption, as the
	// disruption controller would compute it.
	obj.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1,
		DisruptionsAllowed: 1,
		CurrentHealthy:     pods,
		DesiredHealthy:     pods - 1,
		ExpectedPods:       pods,
	}
	return obj
}
