package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeSet is the scheduler snapshot the fitter's frameworks read (through
// viewLister): a NodeInfo per node, the lists of nodes with pods that have
// (anti-)affinity terms, and the count of pods using each volume claim, kept
// in step as pods are added and removed exactly as the kube-scheduler's
// cache.Snapshot keeps them in a mutation session. Unlike that snapshot, it
// also takes nodes added and removed, so that an Engine whose next question
// names other nodes (a node launched or gone, an autoscaler's templates)
// brings its snapshot up to date instead of building it again.
//
// Its lists follow the order in which nodes were added; the plugins' answers
// do not depend on it. NodeInfos carry no image states: only the
// ImageLocality score reads them.
type nodeSet struct {
	byName map[string]*framework.NodeInfo
	list   []fwk.NodeInfo
	// affinity, antiAffinity and nonHostAnti list the nodes with pods with
	// affinity terms, required anti-affinity terms, and required
	// anti-affinity terms whose topology is not the hostname.
	affinity, antiAffinity, nonHostAnti []fwk.NodeInfo
	// claims counts the pods using each volume claim ("namespace/name").
	claims map[string]int
}

// newNodeSet returns the snapshot of nodes, without pods. Of two nodes with one
// name, the later counts.
func newNodeSet(nodes []*corev1.Node) *nodeSet {
	s := &nodeSet{byName: make(map[string]*framework.NodeInfo, len(nodes)), list: make([]fwk.NodeInfo, 0, len(nodes)), claims: map[string]int{}}
	for _, n := range nodes {
		if ni, ok := s.byName[n.Name]; ok {
			ni.SetNode(n)
			continue
		}
		_ = s.addNode(n)
	}
	return s
}

// addNode adds node, without pods.
func (s *nodeSet) addNode(node *corev1.Node) error {
	if _, ok := s.byName[node.Name]; ok {
		return fmt.Errorf("node %q is in the snapshot already", node.Name)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	s.byName[node.Name] = ni
	s.list = append(s.list, ni)
	return nil
}

// removeNode removes a node that has no pods left.
func (s *nodeSet) removeNode(name string) error {
	ni, ok := s.byName[name]
	if !ok {
		return errNodeNotFound(name)
	}
	if len(ni.Pods) > 0 {
		return fmt.Errorf("node %q still has %d pods in the snapshot", name, len(ni.Pods))
	}
	delete(s.byName, name)
	s.list = slices.DeleteFunc(s.list, func(x fwk.NodeInfo) bool { return x == fwk.NodeInfo(ni) })
	return nil
}

// AddPod adds a pod to a node of the set.
func (s *nodeSet) AddPod(pi fwk.PodInfo, node string) error {
	ni, ok := s.byName[node]
	if !ok {
		return errNodeNotFound(node)
	}
	had := s.lists(ni)
	ni.AddPodInfo(pi)
	s.relist(ni, had)
	for key := range framework.PodPVCKeys(pi.GetPod()) {
		s.claims[key]++
	}
	return nil
}

// RemovePod takes a pod off its node.
func (s *nodeSet) RemovePod(logger klog.Logger, pod *corev1.Pod, node string) error {
	ni, ok := s.byName[node]
	if !ok {
		return errNodeNotFound(node)
	}
	had := s.lists(ni)
	if err := ni.RemovePod(logger, pod); err != nil {
		return err
	}
	s.relist(ni, had)
	for key := range framework.PodPVCKeys(pod) {
		if s.claims[key]--; s.claims[key] <= 0 {
			delete(s.claims, key)
		}
	}
	return nil
}

// lists says which of the affinity lists ni belongs in.
func (s *nodeSet) lists(ni *framework.NodeInfo) [3]bool {
	return [3]bool{len(ni.PodsWithAffinity) > 0, len(ni.PodsWithRequiredAntiAffinity) > 0, len(ni.PodsWithRequiredNonHostScopedAntiAffinity) > 0}
}

// relist puts ni into or takes it out of the affinity lists after a change,
// had being where it was before.
func (s *nodeSet) relist(ni *framework.NodeInfo, had [3]bool) {
	has := s.lists(ni)
	for i, list := range []*[]fwk.NodeInfo{&s.affinity, &s.antiAffinity, &s.nonHostAnti} {
		switch {
		case has[i] && !had[i]:
			*list = append(*list, ni)
		case had[i] && !has[i]:
			*list = slices.DeleteFunc(*list, func(x fwk.NodeInfo) bool { return x == fwk.NodeInfo(ni) })
		}
	}
}

// List returns every node's NodeInfo (fwk.NodeInfoLister).
func (s *nodeSet) List() ([]fwk.NodeInfo, error) { return s.list, nil }

// HavePodsWithAffinityList returns the nodes with pods with affinity terms.
func (s *nodeSet) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) { return s.affinity, nil }

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods with
// required anti-affinity terms.
func (s *nodeSet) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.antiAffinity, nil
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList returns the nodes with
// pods with required anti-affinity terms whose topology is not the hostname.
func (s *nodeSet) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.nonHostAnti, nil
}

// Get returns a node's NodeInfo.
func (s *nodeSet) Get(name string) (fwk.NodeInfo, error) {
	if ni, ok := s.byName[name]; ok {
		return ni, nil
	}
	return nil, errNodeNotFound(name)
}

// IsPVCUsedByPods reports whether a pod of the set uses the claim
// ("namespace/name"; fwk.StorageInfoLister).
func (s *nodeSet) IsPVCUsedByPods(key string) bool { return s.claims[key] > 0 }
