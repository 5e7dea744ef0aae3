package plan

import (
	"encoding/binary"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// resourceMemo computes the scheduler's accounting of a pod's requests
// (PodInfo.CalculateResource, about 10 KB of allocations per pod) once per
// distinct set of inputs: pods with plain requests (see plainRequests) whose
// containers, init containers and overhead request the same quantities share
// one answer. Any other pod gets its own computation, so the answer is always
// the scheduler's.
type resourceMemo struct {
	byKey map[string]fwk.PodResource
	buf   []byte
}

func newResourceMemo() *resourceMemo {
	return &resourceMemo{byKey: map[string]fwk.PodResource{}}
}

// get returns the scheduler's accounting of pod's requests.
func (m *resourceMemo) get(pod *corev1.Pod) fwk.PodResource {
	if !plainRequests(pod) {
		return podResource(pod)
	}
	key, ok := m.key(pod)
	if !ok {
		return podResource(pod)
	}
	if res, ok := m.byKey[string(key)]; ok {
		return res
	}
	res := podResource(pod)
	m.byKey[string(key)] = res
	return res
}

// knownPods are the PodInfos of one plan's bound pods, affinity terms parsed
// and requests accounted, by pod object: the next plan takes an object's as
// it is instead of building it again. A snapshot's objects are never changed
// (a changed pod is a new object, see snapshot.FromReader), so an object's
// PodInfo stays true; a PodInfo is only read once built, so two plans may
// hold the same one.
type knownPods map[*corev1.Pod]*sizedPodInfo

// key encodes the inputs of the accounting of a pod with plain requests: for
// each container in order, its kind and every requested quantity in
// millis, resources in name order; then the overhead. It reports false when a
// quantity is not a whole number of millis (its sum would round differently).
func (m *resourceMemo) key(pod *corev1.Pod) ([]byte, bool) {
	b := m.buf[:0]
	ok := true
	one := func(name corev1.ResourceName, q resource.Quantity) {
		milli, exact := millis(q)
		if !exact {
			ok = false
		}
		b = append(b, name...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint64(b, uint64(milli))
	}
	list := func(kind byte, l corev1.ResourceList) {
		b = append(b, kind)
		// CPU and memory first, then any other resource in name order.
		n := 0
		for _, name := range [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, found := l[name]; found {
				one(name, q)
				n++
			}
		}
		if len(l) == n {
			return
		}
		var names [8]corev1.ResourceName
		others := names[:0]
		for name := range l {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				others = append(others, name)
			}
		}
		slices.Sort(others)
		for _, name := range others {
			one(name, l[name])
		}
	}
	for i := range pod.Spec.Containers {
		list('c', pod.Spec.Containers[i].Resources.Requests)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := byte('i')
		if sidecar(c) {
			kind = 's'
		}
		list(kind, c.Resources.Requests)
	}
	list('o', pod.Spec.Overhead)
	m.buf = b
	return b, ok
}

// millis returns q in millis, and whether that is exact.
func millis(q resource.Quantity) (int64, bool) {
	// RoundUp changes the copy only: it replaces an inf.Dec, never changes
	// it in place.
	return q.MilliValue(), q.RoundUp(resource.Milli)
}

// plainRequests reports whether the scheduler's accounting of pod's requests
// depends on its containers' spec requests, its init containers' restart
// policies and its overhead only: no pod-level resources, no node-allocatable
// resource claims, and no status that reports other resources than the spec
// (an in-place resize).
func plainRequests(pod *corev1.Pod) bool {
	s := &pod.Status
	if pod.Spec.Resources != nil || len(s.NodeAllocatableResourceClaimStatuses) > 0 || s.Resources != nil || s.AllocatedResources != nil {
		return false
	}
	return statusMatchesSpec(pod.Spec.Containers, s.ContainerStatuses) && statusMatchesSpec(pod.Spec.InitContainers, s.InitContainerStatuses)
}

// statusMatchesSpec reports whether every container status that reports
// resources reports exactly the container's spec requests.
func statusMatchesSpec(containers []corev1.Container, statuses []corev1.ContainerStatus) bool {
	for i := range statuses {
		cs := &statuses[i]
		if cs.AllocatedResources == nil && (cs.Resources == nil || cs.Resources.Requests == nil) {
			continue
		}
		var spec corev1.ResourceList
		found := false
		for j := range containers {
			if containers[j].Name == cs.Name {
				spec, found = containers[j].Resources.Requests, true
				break
			}
		}
		if !found {
			return false
		}
		if cs.AllocatedResources != nil && !sameList(cs.AllocatedResources, spec) {
			return false
		}
		if cs.Resources != nil && cs.Resources.Requests != nil && !sameList(cs.Resources.Requests, spec) {
			return false
		}
	}
	return true
}

func sidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// sameList reports whether two resource lists name the same resources with
// equal quantities.
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// podInfoMemo builds the scheduler's PodInfo of pods, parsing the required and
// preferred pod (anti-)affinity terms once per workload: a pod with the same
// controller, namespace and affinity as an earlier one gets a copy of that
// one's PodInfo with its own Pod. Parsing a term builds its label selectors,
// dozens of allocations each. PodInfos are never changed once built.
type podInfoMemo struct {
	byOwner map[types.UID][]*framework.PodInfo
}

func newPodInfoMemo() *podInfoMemo {
	return &podInfoMemo{byOwner: map[types.UID][]*framework.PodInfo{}}
}

// fill sets pi to pod's PodInfo. As NodeInfo.AddPod, affinity terms that fail
// to parse are left out. A pod without pod affinity or anti-affinity has no
// terms to parse: its PodInfo is the pod alone (TestPlainPodInfo checks it is
// what NewPodInfo builds).
func (m *podInfoMemo) fill(pi *framework.PodInfo, pod *corev1.Pod) {
	a := pod.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		*pi = framework.PodInfo{Pod: pod}
		return
	}
	*pi = *m.get(pod)
}

// get returns pod's PodInfo. As NodeInfo.AddPod, affinity terms that fail to
// parse are left out.
func (m *podInfoMemo) get(pod *corev1.Pod) *framework.PodInfo {
	owner := metav1.GetControllerOfNoCopy(pod)
	a := pod.Spec.Affinity
	if owner == nil || a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		pi, _ := framework.NewPodInfo(pod)
		return pi
	}
	for _, c := range m.byOwner[owner.UID] {
		if c.Pod.Namespace == pod.Namespace && samePodAffinity(c.Pod.Spec.Affinity, a) {
			pi := *c
			pi.Pod = pod
			return &pi
		}
	}
	pi, err := framework.NewPodInfo(pod)
	if err == nil {
		m.byOwner[owner.UID] = append(m.byOwner[owner.UID], pi)
	}
	return pi
}

// samePodAffinity reports whether two affinities have equal pod affinity and
// anti-affinity (node affinity aside): what PodInfo parses.
func samePodAffinity(a, b *corev1.Affinity) bool {
	pa, pb := a.PodAffinity, b.PodAffinity
	if (pa == nil) != (pb == nil) {
		return false
	}
	if pa != nil && (!sameTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pb.RequiredDuringSchedulingIgnoredDuringExecution) ||
		!sameWeightedTerms(pa.PreferredDuringSchedulingIgnoredDuringExecution, pb.PreferredDuringSchedulingIgnoredDuringExecution)) {
		return false
	}
	na, nb := a.PodAntiAffinity, b.PodAntiAffinity
	if (na == nil) != (nb == nil) {
		return false
	}
	return na == nil || (sameTerms(na.RequiredDuringSchedulingIgnoredDuringExecution, nb.RequiredDuringSchedulingIgnoredDuringExecution) &&
		sameWeightedTerms(na.PreferredDuringSchedulingIgnoredDuringExecution, nb.PreferredDuringSchedulingIgnoredDuringExecution))
}

func sameWeightedTerms(a, b []corev1.WeightedPodAffinityTerm) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.WeightedPodAffinityTerm) bool {
		return x.Weight == y.Weight && sameTerm(&x.PodAffinityTerm, &y.PodAffinityTerm)
	})
}

func sameTerms(a, b []corev1.PodAffinityTerm) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.PodAffinityTerm) bool { return sameTerm(&x, &y) })
}

func sameTerm(a, b *corev1.PodAffinityTerm) bool {
	return a.TopologyKey == b.TopologyKey && slices.Equal(a.Namespaces, b.Namespaces) &&
		slices.Equal(a.MatchLabelKeys, b.MatchLabelKeys) && slices.Equal(a.MismatchLabelKeys, b.MismatchLabelKeys) &&
		sameSelector(a.LabelSelector, b.LabelSelector) && sameSelector(a.NamespaceSelector, b.NamespaceSelector)
}

func sameSelector(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return maps.Equal(a.MatchLabels, b.MatchLabels) && slices.EqualFunc(a.MatchExpressions, b.MatchExpressions,
		func(x, y metav1.LabelSelectorRequirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
}
