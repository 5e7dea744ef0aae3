package plan

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// viewLister is the SharedLister the frameworks read: the snapshot, except
// while a pod's view is selected (see use), when NodeInfos shows the nodes and
// pods that pod's InterPodAffinity and PodTopologySpread PreFilter can count,
// and no others.
//
// Those two plugins compute their PreFilter state by scanning the pods of
// every node. For a pod whose terms and constraints can only match pods of its
// own namespace, and which no anti-affinity term from another namespace can
// match (see fitter.canUseView), only some pods of its namespace can count:
// those its terms or spread constraints select, and those whose required
// anti-affinity matches it. The view holds a superset of them, found through
// an index of the namespace's pods by label (a selector that requires a label
// value can only match pods with that label), so the state computed over the
// view is the state computed over the whole snapshot, for a fraction of the
// work. The view's nodes are those of its pods, and one node without pods for
// each class of nodes that share taints and labels (the hostname label
// aside), which is all the plugins need to find every topology domain; every
// node when the pod's spread or node affinity reads the hostname.
type viewLister struct {
	*cache.Snapshot
	current *podView
	// pending holds the snapshot's pods by namespace, and later changes to
	// namespaces not yet indexed; indexes holds the namespaces indexed.
	pending map[string][]nsChange
	indexes map[string]*nsIndex
	// empty holds a NodeInfo without pods for every node, in the snapshot's
	// order; classes holds one of them per class of nodes (see classKey).
	empty   []fwk.NodeInfo
	classes []fwk.NodeInfo
}

// nsChange is a pod of a namespace added to (delta 1) or removed from (-1) a
// node.
type nsChange struct {
	pod   fwk.PodInfo
	node  *corev1.Node
	delta int
}

// reset points the lister at a new snapshot whose pods are bound, each to the
// node of the same index in nodes.
func (v *viewLister) reset(snap *cache.Snapshot, bound []fwk.PodInfo, nodes []*corev1.Node) {
	v.Snapshot, v.current, v.empty, v.classes = snap, nil, nil, nil
	v.pending, v.indexes = map[string][]nsChange{}, map[string]*nsIndex{}
	for i, pi := range bound {
		ns := pi.GetPod().Namespace
		v.pending[ns] = append(v.pending[ns], nsChange{pod: pi, node: nodes[i], delta: 1})
	}
}

// NodeInfos returns the selected view, or the whole snapshot.
func (v *viewLister) NodeInfos() fwk.NodeInfoLister {
	if v.current != nil {
		return v.current
	}
	return v.Snapshot
}

// changed keeps the index of the pod's namespace, or its pending changes
// until it is indexed, in step with the snapshot.
func (v *viewLister) changed(pi fwk.PodInfo, node *corev1.Node, delta int) {
	c := nsChange{pod: pi, node: node, delta: delta}
	ns := pi.GetPod().Namespace
	if idx, ok := v.indexes[ns]; ok {
		idx.apply(c)
		return
	}
	v.pending[ns] = append(v.pending[ns], c)
}

// done selects the whole snapshot again.
func (v *viewLister) done() { v.current = nil }

// use selects the view of pod (see viewLister), whose required affinity terms
// are those of pi and whose namespace has the labels nsLabels; anti holds the
// required anti-affinity terms of the snapshot's pods.
func (v *viewLister) use(pod *corev1.Pod, pi fwk.PodInfo, nsLabels labels.Set, anti *antiAffinityIndex) error {
	if v.empty == nil {
		if err := v.nodes(); err != nil {
			return err
		}
	}
	idx := v.index(pod.Namespace)
	var chosen []nsChange
	seen := map[fwk.PodInfo]bool{}
	choose := func(c nsChange) {
		if !seen[c.pod] && !idx.dead[c.pod] {
			seen[c.pod] = true
			chosen = append(chosen, c)
		}
	}
	everything := false
	add := func(sel labels.Selector) {
		if _, selectable := sel.Requirements(); everything || !selectable {
			// labels.Nothing(), or every pod chosen already.
			return
		}
		key, ok := requiredLabel(sel)
		if !ok {
			everything = true
			return
		}
		for _, i := range idx.withLabel(key.key, key.value) {
			choose(idx.pods[i])
		}
	}
	for _, t := range pi.GetRequiredAffinityTerms() {
		add(t.Selector)
	}
	for _, t := range pi.GetRequiredAntiAffinityTerms() {
		add(t.Selector)
	}
	allNodes := namesNodes(pod)
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if c.TopologyKey == hostnameLabel {
			allNodes = true
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			everything = true
			continue
		}
		add(sel)
	}
	if everything {
		chosen = chosen[:0]
		for _, c := range idx.pods {
			if !idx.dead[c.pod] {
				chosen = append(chosen, c)
			}
		}
	} else {
		// The pods whose required anti-affinity matches pod: those of the
		// distinct terms that match it (the index keeps them current).
		for _, ct := range anti.matching(pod, nsLabels) {
			for _, owner := range ct.pods {
				p := owner.GetPod()
				if p.Namespace != pod.Namespace {
					continue
				}
				if ni, err := v.Get(p.Spec.NodeName); err == nil {
					choose(nsChange{pod: owner, node: ni.Node(), delta: 1})
				}
			}
		}
	}

	view := &podView{byName: map[string]fwk.NodeInfo{}}
	own := map[string]*framework.NodeInfo{}
	for _, c := range chosen {
		ni, ok := own[c.node.Name]
		if !ok {
			ni = framework.NewNodeInfo()
			ni.SetNode(c.node)
			own[c.node.Name] = ni
			view.own = append(view.own, ni)
		}
		ni.AddPodInfo(c.pod)
	}
	if allNodes {
		view.list = make([]fwk.NodeInfo, 0, len(v.empty))
		for _, e := range v.empty {
			if ni, ok := own[e.Node().Name]; ok {
				view.list = append(view.list, ni)
				continue
			}
			view.list = append(view.list, e)
		}
	} else {
		view.list = make([]fwk.NodeInfo, 0, len(v.classes)+len(view.own))
		view.list = append(view.list, v.classes...)
		for _, ni := range view.own {
			view.list = append(view.list, ni)
		}
	}
	for _, ni := range view.list {
		view.byName[ni.Node().Name] = ni
	}
	for _, ni := range view.own {
		view.byName[ni.Node().Name] = ni
	}
	v.current = view
	return nil
}

// nodes builds the empty NodeInfos and the class representatives.
func (v *viewLister) nodes() error {
	all, err := v.List()
	if err != nil {
		return err
	}
	v.empty = make([]fwk.NodeInfo, len(all))
	seen := map[string]bool{}
	for i, ni := range all {
		e := framework.NewNodeInfo()
		e.SetNode(ni.Node())
		v.empty[i] = e
		if key := classKey(ni.Node()); !seen[key] {
			seen[key] = true
			v.classes = append(v.classes, e)
		}
	}
	return nil
}

// index returns the index of a namespace's pods, building it on first use.
func (v *viewLister) index(ns string) *nsIndex {
	if idx, ok := v.indexes[ns]; ok {
		return idx
	}
	idx := &nsIndex{dead: map[fwk.PodInfo]bool{}, byKey: map[string]map[string][]int32{}}
	for _, c := range v.pending[ns] {
		idx.apply(c)
	}
	delete(v.pending, ns)
	v.indexes[ns] = idx
	return idx
}

// nsIndex lists the pods added to one namespace of the snapshot, with those
// removed since marked dead, and indexes them by the value of each label key
// asked about (see withLabel).
type nsIndex struct {
	pods []nsChange
	// dead holds the pods removed: a pod added again is a new PodInfo.
	dead map[fwk.PodInfo]bool
	// byKey maps a label key to the positions in pods by value of that
	// label.
	byKey map[string]map[string][]int32
}

func (idx *nsIndex) apply(c nsChange) {
	if c.delta < 0 {
		idx.dead[c.pod] = true
		return
	}
	i := int32(len(idx.pods))
	idx.pods = append(idx.pods, c)
	labels := c.pod.GetPod().Labels
	for key, byValue := range idx.byKey {
		if val, ok := labels[key]; ok {
			byValue[val] = append(byValue[val], i)
		}
	}
}

// withLabel returns the positions of the pods labelled key=value, some dead.
func (idx *nsIndex) withLabel(key, value string) []int32 {
	byValue, ok := idx.byKey[key]
	if !ok {
		byValue = map[string][]int32{}
		for i, c := range idx.pods {
			if val, ok := c.pod.GetPod().Labels[key]; ok {
				byValue[val] = append(byValue[val], int32(i))
			}
		}
		idx.byKey[key] = byValue
	}
	return byValue[value]
}

// podView is the NodeInfoLister of one pod's view.
type podView struct {
	list   []fwk.NodeInfo
	own    []*framework.NodeInfo // the NodeInfos with pods
	byName map[string]fwk.NodeInfo
}

func (view *podView) List() ([]fwk.NodeInfo, error) { return view.list, nil }

func (view *podView) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return view.filter(func(ni *framework.NodeInfo) bool { return len(ni.PodsWithAffinity) > 0 }), nil
}

func (view *podView) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return view.filter(func(ni *framework.NodeInfo) bool { return len(ni.PodsWithRequiredAntiAffinity) > 0 }), nil
}

func (view *podView) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return view.filter(func(ni *framework.NodeInfo) bool { return len(ni.PodsWithRequiredNonHostScopedAntiAffinity) > 0 }), nil
}

func (view *podView) Get(name string) (fwk.NodeInfo, error) {
	if ni, ok := view.byName[name]; ok {
		return ni, nil
	}
	return nil, errNodeNotFound(name)
}

// filter lists the NodeInfos with pods for which keep is true; the shared
// empty ones have no pods.
func (view *podView) filter(keep func(*framework.NodeInfo) bool) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, ni := range view.own {
		if keep(ni) {
			out = append(out, ni)
		}
	}
	return out
}
