// Package testutil builds Kubernetes objects for tests, with options:
//
//	testutil.Pod("p", testutil.OnNode("n1"), testutil.CPU("500m"))
package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodOption changes a pod under construction.
type PodOption func(*corev1.Pod)

// Pod returns a pod in namespace "default" with one container (kwok runs
// nothing, so the image is only a name), changed by opts.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}, Annotations: map[string]string{}},
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

// Request sets the first container's request of any resource, such as
// nvidia.com/gpu.
func Request(name corev1.ResourceName, q string) PodOption { return request(name, q) }

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

// WithUID sets metadata.uid (objects read from a cluster always have one).
func WithUID() PodOption {
	return func(p *corev1.Pod) { p.UID = types.UID(p.Namespace + "/" + p.Name) }
}

// OwnedBy sets a controller owner reference of the given kind.
func OwnedBy(kind, name string) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(kind + "-" + name), Controller: &yes}}
	}
}

// Annotation sets an annotation.
func Annotation(k, v string) PodOption { return func(p *corev1.Pod) { p.Annotations[k] = v } }

// Tolerate adds a toleration for key=value with any effect.
func Tolerate(key, value string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value})
	}
}

// RequireNodeLabel adds required node affinity to nodes with label key=value.
func RequireNodeLabel(key, value string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = ensureAffinity(p.Spec.Affinity)
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}},
			}}},
		}}
	}
}

// AntiAffinity adds required pod anti-affinity to pods labelled app=app, per
// topologyKey (kubernetes.io/hostname or topology.kubernetes.io/zone).
func AntiAffinity(app, topologyKey string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = ensureAffinity(p.Spec.Affinity)
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			TopologyKey:   topologyKey,
		}}}
	}
}

// Spread adds a DoNotSchedule topology spread constraint over pods labelled
// app=app.
func Spread(app, topologyKey string, maxSkew int32) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: topologyKey, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		})
	}
}

// HostPort exposes a container port on the host.
func HostPort(port int32) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// EmptyDir adds an emptyDir volume.
func EmptyDir(name string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
}

// Phase sets status.phase.
func Phase(phase corev1.PodPhase) PodOption { return func(p *corev1.Pod) { p.Status.Phase = phase } }

// Terminating sets a deletionTimestamp.
func Terminating() PodOption {
	return func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
}

func ensureAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return &corev1.Affinity{}
	}
	return a
}
