package snapshot

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// What loading leaves out of the objects, because nothing that plans reads
// it (the planner, the classifier, the kube-scheduler Filter plugins the
// planner runs) and it can be most of an object's size:
//
//   - metadata.managedFields: server-side apply's bookkeeping, in every
//     object when kubectl writes it with --show-managed-fields;
//   - the annotation kubectl.kubernetes.io/last-applied-configuration:
//     kubectl apply's copy of the whole object as applied;
//   - a node's status.images: every image on the node, with its size; the
//     scheduler reads them only to score (ImageLocality), and the planner
//     runs no score plugin.
//
// They are still read and checked, so an input is refused or accepted as
// before; only the decoded objects are smaller. One consequence: the same
// object given twice, the copies differing only there, is counted once with
// a warning (check.go), where it was refused; both copies plan alike.
// TestLoadChangesNoPlan plans a cluster with and without them.

// lastAppliedAnnotation is kubectl apply's copy of the object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// compact drops what loading leaves out from an object decoded whole.
func compact(obj any) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastAppliedAnnotation)
		}
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
}

// Transform is the informer transform of the controllers' cache
// (cache.Options.DefaultTransform): it keeps of every object only what the
// controllers read, so that the cache of a large cluster holds less. On top of
// what loading leaves out (compact), it drops:
//
//   - from every container of a pod (init and ephemeral ones included): its
//     environment, command, arguments, probes, lifecycle hooks, volume mounts
//     and security context. The scheduler's Filter plugins read a
//     container's resources, ports, restart policy and volume devices; the
//     classifier and the drain read the pod's metadata, volumes and status.
//     Nothing reads the rest.
//   - a pod's volumes of service account tokens, ConfigMaps, Secrets and the
//     downward API (projected or not: every pod has one, kube-api-access-*):
//     the scheduler's volume plugins count persistent, ephemeral and
//     in-tree cloud disks, and the planner local storage (emptyDir,
//     hostPath); none of them reads these.
//   - from a pod's status: its IP addresses and its host's, and of each
//     container status all but the name and the resources it reports (the
//     scheduler's accounting of an in-place resize reads those).
//   - the pod template of ReplicaSets and StatefulSets: the planner reads
//     their selectors (the scheduler's default spreading), nothing else.
//
// And it makes pods share their equal labels, owner references,
// tolerations, affinity, topology spread constraints and resource lists
// (share.go).
//
// Every write the controllers make starts from a fresh GET or is a merge
// patch of the fields it changes, so no write sends a trimmed object back.
// It changes the object in place and is idempotent, as informers require.
func Transform(obj any) (any, error) {
	compact(obj)
	switch o := obj.(type) {
	case *corev1.Pod:
		for i := range o.Spec.InitContainers {
			trimContainer(&o.Spec.InitContainers[i])
		}
		for i := range o.Spec.Containers {
			trimContainer(&o.Spec.Containers[i])
		}
		for i := range o.Spec.EphemeralContainers {
			trimContainer((*corev1.Container)(&o.Spec.EphemeralContainers[i].EphemeralContainerCommon))
		}
		o.Spec.Volumes = slices.DeleteFunc(o.Spec.Volumes, unread)
		trimStatus(&o.Status)
		sharePod(o)
	case *appsv1.ReplicaSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *appsv1.StatefulSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	}
	return obj, nil
}

func trimContainer(c *corev1.Container) {
	c.Env, c.EnvFrom, c.Command, c.Args = nil, nil, nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	c.VolumeMounts, c.SecurityContext = nil, nil
}

// unread reports whether v is a volume that nothing planning reads: a
// service account token, ConfigMap, Secret or downward API volume.
func unread(v corev1.Volume) bool {
	return v.Projected != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil
}

func trimStatus(s *corev1.PodStatus) {
	s.PodIP, s.PodIPs, s.HostIP, s.HostIPs = "", nil, "", nil
	for _, cs := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range cs {
			cs[i] = corev1.ContainerStatus{Name: cs[i].Name, AllocatedResources: cs[i].AllocatedResources, Resources: cs[i].Resources}
		}
	}
}
