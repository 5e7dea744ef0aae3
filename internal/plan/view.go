package plan

import (
	"maps"
	"slices"

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
	// Snapshot is empty: it answers the pod-group listers of
	// fwk.SharedLister, which the filter plugins do not read.
	*cache.Snapshot
	// set is the snapshot of nodes and pods.
	set     *nodeSet
	current *podView
	pods    *podIndex
	// empty holds a NodeInfo without pods for every node, in the snapshot's
	// order; classes holds one of them per class of nodes (see classKey).
	empty   []fwk.NodeInfo
	classes []fwk.NodeInfo
}

// podIndex holds the pods of the snapshot by namespace and by the labels
// with the keys that the snapshot's pods select on (in required pod affinity
// terms and spread constraints); other keys are looked up by scanning the
// namespace. Removed pods stay in its lists, marked dead: a pod added again is
// a new PodInfo.
type podIndex struct {
	// pods holds every pod added, in order; the lists hold positions in it.
	pods    []viewPod
	byNS    map[string]*[]int32
	byLabel map[labelKey]*[]int32
	keys    map[string]bool
	// keyList holds keys, for add (a slice is faster to range over).
	keyList []string
	dead    map[fwk.PodInfo]bool
	// lastNS and lastKey remember where add put the previous pod: the pods of
	// a workload usually come one after another.
	lastNS, lastKey *[]int32
	lastNSName      string
	lastKeyName     labelKey
}

// viewPod is a pod of the snapshot and its node.
type viewPod struct {
	pi   fwk.PodInfo
	node *corev1.Node
}

// newPodIndex returns an index of the labels with keys, for about pods pods.
func newPodIndex(keys map[string]bool, pods int) *podIndex {
	return &podIndex{pods: make([]viewPod, 0, pods), byNS: map[string]*[]int32{}, byLabel: map[labelKey]*[]int32{}, keys: keys,
		keyList: slices.Collect(maps.Keys(keys)), dead: map[fwk.PodInfo]bool{}}
}

func (x *podIndex) add(pi fwk.PodInfo, node *corev1.Node) {
	p := pi.GetPod()
	at := int32(len(x.pods))
	x.pods = append(x.pods, viewPod{pi, node})
	if x.lastNS == nil || p.Namespace != x.lastNSName {
		x.lastNS, x.lastNSName = listOf(x.byNS, p.Namespace), p.Namespace
	}
	*x.lastNS = append(*x.lastNS, at)
	for _, k := range x.keyList {
		if v, ok := p.Labels[k]; ok {
			if key := (labelKey{p.Namespace, k, v}); x.lastKey == nil || key != x.lastKeyName {
				x.lastKey, x.lastKeyName = listOf(x.byLabel, key), key
			}
			*x.lastKey = append(*x.lastKey, at)
		}
	}
}

// listOf returns the list of key in m, adding an empty one.
func listOf[K comparable](m map[K]*[]int32, key K) *[]int32 {
	l, ok := m[key]
	if !ok {
		l = new([]int32)
		m[key] = l
	}
	return l
}

// inNamespace returns the positions of the pods of namespace ns, some dead.
func (x *podIndex) inNamespace(ns string) []int32 {
	if l, ok := x.byNS[ns]; ok {
		return *l
	}
	return nil
}

// withLabel returns the positions of the pods of namespace ns labelled
// key=value, some dead.
func (x *podIndex) withLabel(ns, key, value string) []int32 {
	if x.keys[key] {
		if l, ok := x.byLabel[labelKey{ns, key, value}]; ok {
			return *l
		}
		return nil
	}
	var out []int32
	for _, at := range x.inNamespace(ns) {
		if v, ok := x.pods[at].pi.GetPod().Labels[key]; ok && v == value {
			out = append(out, at)
		}
	}
	return out
}

// selectedKeys adds to keys the label keys that pod's required pod
// (anti-)affinity terms and DoNotSchedule spread constraints select on.
func selectedKeys(pod *corev1.Pod, keys map[string]bool) {
	sel := func(ls *metav1.LabelSelector) {
		if ls == nil {
			return
		}
		for k := range ls.MatchLabels {
			keys[k] = true
		}
		for _, e := range ls.MatchExpressions {
			keys[e.Key] = true
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				sel(t.LabelSelector)
			}
		}
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				sel(t.LabelSelector)
			}
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			sel(c.LabelSelector)
		}
	}
}

// reset points the lister at a new snapshot whose pods are indexed in pods.
func (v *viewLister) reset(snap *nodeSet, pods *podIndex) {
	if v.Snapshot == nil {
		v.Snapshot = cache.NewEmptySnapshot()
	}
	v.set, v.current, v.pods = snap, nil, pods
	v.nodesChanged()
}

// nodesChanged drops the empty NodeInfos and class representatives (see
// nodes): the snapshot's nodes were added, removed or renewed.
func (v *viewLister) nodesChanged() { v.empty, v.classes = nil, nil }

// NodeInfos returns the selected view, or the whole snapshot.
func (v *viewLister) NodeInfos() fwk.NodeInfoLister {
	if v.current != nil {
		return v.current
	}
	return v.set
}

// StorageInfos returns the snapshot's count of volume claims in use.
func (v *viewLister) StorageInfos() fwk.StorageInfoLister { return v.set }

// changed keeps the index in step with the snapshot.
func (v *viewLister) changed(pi fwk.PodInfo, node *corev1.Node, delta int) {
	if delta < 0 {
		v.pods.dead[pi] = true
		return
	}
	v.pods.add(pi, node)
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
	x := v.pods
	var chosen []viewPod
	seen := map[fwk.PodInfo]bool{}
	choose := func(vp viewPod) {
		if !seen[vp.pi] && !x.dead[vp.pi] {
			seen[vp.pi] = true
			chosen = append(chosen, vp)
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
		for _, at := range x.withLabel(pod.Namespace, key.key, key.value) {
			choose(x.pods[at])
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
		for _, at := range x.inNamespace(pod.Namespace) {
			if vp := x.pods[at]; !x.dead[vp.pi] {
				chosen = append(chosen, vp)
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
				if ni, err := v.set.Get(p.Spec.NodeName); err == nil {
					choose(viewPod{owner, ni.Node()})
				}
			}
		}
	}

	view := &podView{byName: map[string]fwk.NodeInfo{}}
	own := map[string]*framework.NodeInfo{}
	for _, vp := range chosen {
		ni, ok := own[vp.node.Name]
		if !ok {
			ni = framework.NewNodeInfo()
			// The node as the snapshot has it now: an engine sets a node
			// object whose taints changed in place (Engine.update), and
			// the index keeps the one its pods were added with.
			node := vp.node
			if cur, err := v.set.Get(node.Name); err == nil {
				node = cur.Node()
			}
			ni.SetNode(node)
			own[vp.node.Name] = ni
			view.own = append(view.own, ni)
		}
		ni.AddPodInfo(vp.pi)
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
	all, err := v.set.List()
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
