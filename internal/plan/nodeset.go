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
	infos := make([]*framework.NodeInfo, len(nodes))
	for i, n := range nodes {
		infos[i] = framework.NewNodeInfo()
		infos[i].SetNode(n)
	}
	return nodeSetOf(infos)
}

// nodeSetOf returns the snapshot of infos, NodeInfos with their nodes set and
// pods added. Of two with one node name, the later counts.
func nodeSetOf(infos []*framework.NodeInfo) *nodeSet {
	s := &nodeSet{byName: make(map[string]*framework.NodeInfo, len(infos)), list: make([]fwk.NodeInfo, 0, len(infos)), claims: map[string]int{}}
	for _, ni := range infos {
		name := ni.Node().Name
		if old, ok := s.byName[name]; ok {
			s.list[slices.Index(s.list, fwk.NodeInfo(old))] = ni
		} else {
			s.list = append(s.list, ni)
		}
		s.byName[name] = ni
	}
	for _, x := range s.list {
		ni := x.(*framework.NodeInfo)
		s.relist(ni, [3]bool{})
		for key, n := range ni.PVCRefCounts {
			s.claims[key] += n
		}
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
	for i, list := range s.affinityLists() {
		switch {
		case has[i] && !had[i]:
			*list = append(*list, ni)
		case had[i] && !has[i]:
			*list = slices.DeleteFunc(*list, func(x fwk.NodeInfo) bool { return x == fwk.NodeInfo(ni) })
		}
	}
}

// affinityLists returns the three affinity lists, in the order of lists.
func (s *nodeSet) affinityLists() [3]*[]fwk.NodeInfo {
	return [3]*[]fwk.NodeInfo{&s.affinity, &s.antiAffinity, &s.nonHostAnti}
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

// builtNodes are the NodeInfos of one plan's destination nodes as it built
// them, before any change, by node name: the next plan copies a node's
// (NodeInfo.Snapshot) when the node object and its pods' PodInfos are the
// same ones, in the same order, instead of adding each pod again. A stored
// NodeInfo is never changed, so two plans may copy it at once.
type builtNodes map[string]*builtNode

type builtNode struct {
	ni   *framework.NodeInfo
	pods []*sizedPodInfo
}

// nodeInfo returns a NodeInfo of node holding pods, and records in next what
// the next plan may copy.
func (b builtNodes) nodeInfo(node *corev1.Node, pods []*sizedPodInfo, next builtNodes) *framework.NodeInfo {
	if last := b[node.Name]; last != nil && last.ni.Node() == node && slices.Equal(last.pods, pods) {
		next[node.Name] = last
		return last.ni.SnapshotConcrete()
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, pi := range pods {
		ni.AddPodInfo(pi)
	}
	next[node.Name] = &builtNode{ni: ni.SnapshotConcrete(), pods: pods}
	return ni
}
