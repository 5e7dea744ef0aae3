package plan

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// viewLister is the SharedLister the frameworks read: the snapshot, except
// that while a namespace view is selected NodeInfos shows every node with only
// the pods of that namespace.
//
// InterPodAffinity and PodTopologySpread compute their PreFilter state by
// scanning the pods of every node. For a pod whose terms and constraints can
// only match pods of its own namespace, and which no anti-affinity term from
// another namespace can match (see fitter.canUseView), the pods of other
// namespaces never count, so the state computed over the view is the state
// computed over the whole snapshot, for a fraction of the work.
type viewLister struct {
	*cache.Snapshot
	current *nsView
	views   map[string]*nsView
}

// NodeInfos returns the selected view, or the whole snapshot.
func (v *viewLister) NodeInfos() fwk.NodeInfoLister {
	if v.current != nil {
		return v.current
	}
	return v.Snapshot
}

// use selects the view of namespace ns (building it on first use), or the
// whole snapshot when ns is "".
func (v *viewLister) use(ns string) error {
	if ns == "" {
		v.current = nil
		return nil
	}
	view, ok := v.views[ns]
	if !ok {
		var err error
		if view, err = newNSView(v.Snapshot, ns); err != nil {
			return err
		}
		v.views[ns] = view
	}
	v.current = view
	return nil
}

// add and remove keep an existing view of the pod's namespace in step with the
// snapshot.
func (v *viewLister) add(pi fwk.PodInfo, node string) {
	if view, ok := v.views[pi.GetPod().Namespace]; ok {
		if ni, ok := view.byName[node]; ok {
			ni.AddPodInfo(pi)
		}
	}
}

func (v *viewLister) remove(logger klog.Logger, pod *corev1.Pod, node string) error {
	if view, ok := v.views[pod.Namespace]; ok {
		if ni, ok := view.byName[node]; ok {
			return ni.RemovePod(logger, pod)
		}
	}
	return nil
}

// nsView is every node of the snapshot with only the pods of one namespace.
type nsView struct {
	list   []fwk.NodeInfo
	byName map[string]*framework.NodeInfo
}

func newNSView(snap *cache.Snapshot, ns string) (*nsView, error) {
	all, err := snap.List()
	if err != nil {
		return nil, err
	}
	v := &nsView{list: make([]fwk.NodeInfo, 0, len(all)), byName: make(map[string]*framework.NodeInfo, len(all))}
	for _, ni := range all {
		n := framework.NewNodeInfo()
		n.SetNode(ni.Node())
		for _, pi := range ni.GetPods() {
			if pi.GetPod().Namespace == ns {
				n.AddPodInfo(pi)
			}
		}
		v.list = append(v.list, n)
		v.byName[ni.Node().Name] = n
	}
	return v, nil
}

func (v *nsView) List() ([]fwk.NodeInfo, error) { return v.list, nil }

func (v *nsView) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return v.filter(func(ni fwk.NodeInfo) bool { return len(ni.GetPodsWithAffinity()) > 0 }), nil
}

func (v *nsView) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return v.filter(func(ni fwk.NodeInfo) bool { return len(ni.GetPodsWithRequiredAntiAffinity()) > 0 }), nil
}

func (v *nsView) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return v.filter(func(ni fwk.NodeInfo) bool { return len(ni.GetPodsWithRequiredNonHostScopedAntiAffinity()) > 0 }), nil
}

func (v *nsView) Get(name string) (fwk.NodeInfo, error) {
	if ni, ok := v.byName[name]; ok {
		return ni, nil
	}
	return nil, errNodeNotFound(name)
}

func (v *nsView) filter(keep func(fwk.NodeInfo) bool) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, ni := range v.list {
		if keep(ni) {
			out = append(out, ni)
		}
	}
	return out
}
