package snapshot

import (
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pods of one workload carry the same labels, owner, tolerations and
// resource requests; decoded, each pod has its own copy of them, about a
// fifth of what a cached pod takes. Transform makes the pods it sees share
// one copy of each equal part instead. This is safe because nothing changes
// a cached object: the controllers read the cache and write with merge
// patches or from a fresh GET, the planner places copies, and client-go's
// informers replace an object on each event rather than change it; a deep
// copy (DeepCopy, a List without UnsafeDisableDeepCopy) copies the shared
// parts like any other.

// maxShared bounds each table of shared parts: when it is full it starts
// again empty. Objects keep the parts they share; only later ones share
// afresh. A cluster has about as many different parts as workloads, far
// fewer than this.
const maxShared = 8192

// sharer is one table of shared parts of type T, by a key that is equal
// exactly when the parts are.
type sharer[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// share returns the part already shared under key, or v, now shared.
func (s *sharer[T]) share(key string, v T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.m[key]; ok {
		return got
	}
	if s.m == nil || len(s.m) >= maxShared {
		s.m = make(map[string]T)
	}
	s.m[key] = v
	return v
}

var (
	sharedLabels      sharer[map[string]string]
	sharedResources   sharer[corev1.ResourceList]
	sharedTolerations sharer[[]corev1.Toleration]
	sharedOwners      sharer[[]metav1.OwnerReference]
	sharedAffinities  sharer[*corev1.Affinity]
	sharedSpreads     sharer[[]corev1.TopologySpreadConstraint]
)

// sharePod makes pod's labels, owner references, tolerations, affinity,
// topology spread constraints and its containers' resource lists the shared
// copies of equal ones.
func sharePod(pod *corev1.Pod) {
	pod.Labels = share(&sharedLabels, pod.Labels)
	pod.OwnerReferences = share(&sharedOwners, pod.OwnerReferences)
	pod.Spec.Tolerations = share(&sharedTolerations, pod.Spec.Tolerations)
	pod.Spec.Affinity = share(&sharedAffinities, pod.Spec.Affinity)
	pod.Spec.TopologySpreadConstraints = share(&sharedSpreads, pod.Spec.TopologySpreadConstraints)
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests = share(&sharedResources, r.Requests)
			r.Limits = share(&sharedResources, r.Limits)
		}
	}
}

// share returns the copy of v that table t shares, keyed by v's JSON form:
// equal exactly when the parts are (maps are written in key order), whatever
// fields the API gives them. An empty part (null, {} or []) is left as it is.
func share[T any](t *sharer[T], v T) T {
	key, err := json.Marshal(v)
	if err != nil {
		return v
	}
	switch k := string(key); k {
	case "null", "{}", "[]":
		return v
	default:
		return t.share(k, v)
	}
}
