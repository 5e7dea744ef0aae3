package snapshot

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
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

// sep separates the fields of a key: no label, name or quantity holds it.
const sep = "\x00"

// sharePod makes pod's labels, owner references, tolerations, affinity,
// topology spread constraints and its containers' resource lists the shared
// copies of equal ones.
func sharePod(pod *corev1.Pod) {
	if len(pod.Labels) > 0 {
		pod.Labels = sharedLabels.share(labelsKey(pod.Labels), pod.Labels)
	}
	if len(pod.OwnerReferences) > 0 {
		pod.OwnerReferences = sharedOwners.share(ownersKey(pod.OwnerReferences), pod.OwnerReferences)
	}
	if len(pod.Spec.Tolerations) > 0 {
		pod.Spec.Tolerations = sharedTolerations.share(tolerationsKey(pod.Spec.Tolerations), pod.Spec.Tolerations)
	}
	// Affinity and spread constraints are rarer, and their keys are their
	// JSON form: exact, and written once per pod event.
	if a := pod.Spec.Affinity; a != nil {
		if key, err := json.Marshal(a); err == nil {
			pod.Spec.Affinity = sharedAffinities.share(string(key), a)
		}
	}
	if c := pod.Spec.TopologySpreadConstraints; len(c) > 0 {
		if key, err := json.Marshal(c); err == nil {
			pod.Spec.TopologySpreadConstraints = sharedSpreads.share(string(key), c)
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests = shareResources(r.Requests)
			r.Limits = shareResources(r.Limits)
		}
	}
}

func shareResources(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	return sharedResources.share(resourcesKey(l), l)
}

func labelsKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(sep)
		b.WriteString(m[k])
		b.WriteString(sep)
	}
	return b.String()
}

func resourcesKey(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		q := l[corev1.ResourceName(n)]
		b.WriteString(n)
		b.WriteString(sep)
		// The string form and the format: equal quantities written
		// differently (1 and 1000m) stay apart, as the decoded objects
		// would have them.
		b.WriteString(q.String())
		b.WriteString(sep)
		b.WriteString(string(q.Format))
		b.WriteString(sep)
	}
	return b.String()
}

func tolerationsKey(ts []corev1.Toleration) string {
	var b strings.Builder
	for i := range ts {
		t := &ts[i]
		b.WriteString(t.Key)
		b.WriteString(sep)
		b.WriteString(string(t.Operator))
		b.WriteString(sep)
		b.WriteString(t.Value)
		b.WriteString(sep)
		b.WriteString(string(t.Effect))
		b.WriteString(sep)
		if t.TolerationSeconds != nil {
			b.WriteString(strconv.FormatInt(*t.TolerationSeconds, 10))
		}
		b.WriteString(sep)
	}
	return b.String()
}

func ownersKey(os []metav1.OwnerReference) string {
	var b strings.Builder
	flag := func(p *bool) {
		switch {
		case p == nil:
			b.WriteString("-")
		case *p:
			b.WriteString("t")
		default:
			b.WriteString("f")
		}
	}
	for i := range os {
		o := &os[i]
		b.WriteString(o.APIVersion)
		b.WriteString(sep)
		b.WriteString(o.Kind)
		b.WriteString(sep)
		b.WriteString(o.Name)
		b.WriteString(sep)
		b.WriteString(string(o.UID))
		b.WriteString(sep)
		flag(o.Controller)
		flag(o.BlockOwnerDeletion)
		b.WriteString(sep)
	}
	return b.String()
}
