package plan

import (
	"context"
	"math"
	"reflect"
	"sort"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// cycle is one pod's scheduling cycle: the framework chosen for it and the
// state its PreFilter plugins computed.
type cycle struct {
	fw    framework.Framework
	state fwk.CycleState
	// only is the set of nodes PreFilter restricts the pod to; nil means any.
	only map[string]struct{}
}

// prepare runs the PreFilter plugins for pod against the snapshot as it is now.
// It returns the cycle for Filter, or the status of a PreFilter that rejects
// the pod outright.
func (f *fitter) prepare(ctx context.Context, pod *corev1.Pod) (*cycle, *fwk.Status) {
	c, _, status := f.prepareScoped(ctx, pod, f.needsFull(pod))
	return c, status
}

// prepareScoped is prepare with the framework chosen by the caller (full or
// lean). It also returns the scope of the state: the namespace whose pods (and
// the pods whose anti-affinity reaches across namespaces) are the only ones it
// depends on, or "" when any pod may count.
func (f *fitter) prepareScoped(ctx context.Context, pod *corev1.Pod, full bool) (*cycle, string, *fwk.Status) {
	c := &cycle{fw: f.lean, state: framework.NewCycleState()}
	scope := pod.Namespace
	if full {
		c.fw = f.full
		if f.exhaustive || !f.canUseView(pod) {
			scope = ""
			if err := f.materialize(); err != nil {
				return nil, "", fwk.AsStatus(err)
			}
		}
	}
	if full && scope != "" {
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			return nil, "", fwk.AsStatus(err)
		}
		nsLabels := f.namespaceLabels(pod.Namespace)
		if err := f.views.use(pod, pi, nsLabels, f.anti); err != nil {
			return nil, "", fwk.AsStatus(err)
		}
		defer f.views.done()
	}
	result, status, _ := c.fw.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		return nil, "", status
	}
	if result != nil && result.NodeNames != nil {
		c.only = map[string]struct{}{}
		for n := range result.NodeNames {
			c.only[n] = struct{}{}
		}
	}
	return c, scope, nil
}

// cachedCycle is a PreFilter state kept for the pods of one template and
// brought up to date, before each use, with the changes made to the snapshot
// since (see fitter.sync).
type cachedCycle struct {
	c    *cycle
	full bool
	// scope is the namespace of the changes that can affect the state, or ""
	// for all (see prepareScoped).
	scope string
	// cursor is the length of the fitter's log the state has seen.
	cursor int
	// spread is set when the state holds PodTopologySpread's, whose critical
	// paths are recomputed after changes (see repairSpread).
	spread bool
}

// cycleFor returns the cycle for pod, a pod of template t (nil when it has
// none). The PreFilter state is computed once per template and kept current
// through the plugins' PreFilterExtensions (AddPod and RemovePod), which the
// scheduler maintains to answer exactly what a new PreFilter would. Two cases
// are not kept but computed afresh each time: the state of a pod with volume
// claims (see keepable), and a spread constraint with an empty label selector
// (the extension counts pods that PreFilter does not).
func (f *fitter) cycleFor(ctx context.Context, pod *corev1.Pod, t *template) (*cycle, *fwk.Status) {
	full := f.needsFull(pod)
	if t == nil || f.exhaustive {
		c, _, status := f.prepareScoped(ctx, pod, full)
		return c, status
	}
	if cc := t.cycle; cc != nil && (cc.full || !full) {
		if f.sync(ctx, cc, pod) {
			return cc.c, nil
		}
		t.cycle = nil
	}
	c, scope, status := f.prepareScoped(ctx, pod, full)
	if status != nil {
		return nil, status
	}
	if cc := (&cachedCycle{c: c, full: full, scope: scope, cursor: len(f.log)}); f.keepable(pod, cc) {
		t.cycle = cc
	}
	return c, nil
}

// keepable reports whether a state computed for pod may be kept and brought
// up to date (see cycleFor), and marks states that hold spread counts.
func (f *fitter) keepable(pod *corev1.Pod, cc *cachedCycle) bool {
	if hasClaims(pod) {
		// VolumeBinding's and VolumeRestrictions' states depend on the
		// claims, and a generic ephemeral volume's claim is named after
		// its pod: pods of one template have different ones.
		return false
	}
	if !cc.full {
		return true
	}
	if _, err := cc.c.state.Read(spreadStateKey); err == nil {
		if spreadUnrepairable.Load() {
			return false
		}
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if sel := c.LabelSelector; sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
				return false
			}
		}
		cc.spread = true
	}
	return true
}

// sync replays the changes made since the state of cc was computed through
// the framework's PreFilterExtensions. It returns false when the state cannot
// be brought up to date and must be computed again. (States of pods with
// claims are never kept, so VolumeRestrictions, whose Skip also depends on
// other pods, never needs the same care as InterPodAffinity.)
func (f *fitter) sync(ctx context.Context, cc *cachedCycle, pod *corev1.Pod) bool {
	if cc.cursor == len(f.log) {
		return true
	}
	if !cc.full {
		// A lean state without claims depends on no other pod.
		cc.cursor = len(f.log)
		return true
	}
	// InterPodAffinity returns Skip from PreFilter when neither the pod's
	// terms nor any existing pod's anti-affinity concern it, and the framework
	// then leaves it out of AddPod as well as Filter: a pod added since whose
	// anti-affinity matches the pod makes the state stale.
	ipaSkipped := cc.c.state.GetSkipFilterPlugins().Has(names.InterPodAffinity)
	apply := func(i int) bool {
		m := f.log[i]
		if ipaSkipped && m.delta > 0 && len(m.pod.GetRequiredAntiAffinityTerms()) > 0 {
			nsLabels := f.namespaceLabels(pod.Namespace)
			for _, t := range m.pod.GetRequiredAntiAffinityTerms() {
				if t.Matches(pod, nsLabels) {
					return false
				}
			}
		}
		var s *fwk.Status
		if m.delta > 0 {
			s = cc.c.fw.RunPreFilterExtensionAddPod(ctx, cc.c.state, pod, m.pod, m.node)
		} else {
			s = cc.c.fw.RunPreFilterExtensionRemovePod(ctx, cc.c.state, pod, m.pod, m.node)
		}
		return s.IsSuccess()
	}
	if cc.scope == "" {
		for i := cc.cursor; i < len(f.log); i++ {
			if !apply(i) {
				return false
			}
		}
	} else {
		// The changes of the scope's namespace and of pods whose anti-affinity
		// reaches across namespaces, in the order they were made.
		a, b := since(f.byNS[cc.scope], cc.cursor), since(f.cross, cc.cursor)
		for len(a) > 0 || len(b) > 0 {
			var i int
			switch {
			case len(b) == 0 || (len(a) > 0 && a[0] < b[0]):
				i, a = a[0], a[1:]
			case len(a) > 0 && a[0] == b[0]:
				i, a, b = a[0], a[1:], b[1:]
			default:
				i, b = b[0], b[1:]
			}
			if !apply(i) {
				return false
			}
		}
	}
	cc.cursor = len(f.log)
	if cc.spread {
		return repairSpread(cc.c.state)
	}
	return true
}

// since returns the entries of an ascending index list that are at least from.
func since(list []int, from int) []int {
	return list[sort.SearchInts(list, from):]
}

// hasClaims reports whether pod mounts persistent volume claims, directly or
// through generic ephemeral volumes.
func hasClaims(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// reachesOtherNamespaces reports whether a pod's required anti-affinity may
// match pods of other namespaces than its own.
func reachesOtherNamespaces(pi fwk.PodInfo) bool {
	ns := pi.GetPod().Namespace
	for _, t := range pi.GetRequiredAntiAffinityTerms() {
		if t.NamespaceSelector != nil {
			if _, selectable := t.NamespaceSelector.Requirements(); selectable {
				return true
			}
		}
		for n := range t.Namespaces {
			if n != ns {
				return true
			}
		}
	}
	return false
}

// spreadStateKey is where PodTopologySpread keeps its PreFilter state.
const spreadStateKey = fwk.StateKey("PreFilter" + names.PodTopologySpread)

// spreadUnrepairable is set when PodTopologySpread's PreFilter state does not
// have the shape repairSpread expects (a new scheduler version); states with
// spread constraints are then computed afresh for every pod. Plans may run
// concurrently, hence the atomic.
var spreadUnrepairable atomic.Bool

// repairSpread recomputes the critical paths of PodTopologySpread's PreFilter
// state from its per-domain counts, as PreFilter does.
//
// The plugin's AddPod extension keeps the counts exact but updates the two
// tracked critical paths only (the scheduler calls it for preemption, which
// only removes pods): after pods are added to the least-loaded domain, the
// minimum it reports can be too high. Filter reads the minimum, so without the
// repair a kept state would let pods through that the scheduler rejects. The
// fields are exported "for comparison during testing"; their type is not, so
// they are reached by reflection. When the shape is not the expected one the
// repair reports false and spreadUnrepairable is set.
func repairSpread(state fwk.CycleState) bool {
	d, err := state.Read(spreadStateKey)
	if err != nil {
		return true
	}
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		spreadUnrepairable.Store(true)
		return false
	}
	s := v.Elem()
	counts, paths := s.FieldByName("TpValueToMatchNum"), s.FieldByName("CriticalPaths")
	if !counts.IsValid() || !paths.IsValid() || counts.Kind() != reflect.Slice || paths.Kind() != reflect.Slice ||
		counts.Len() != paths.Len() || counts.Type().Elem() != reflect.TypeFor[map[string]int]() {
		spreadUnrepairable.Store(true)
		return false
	}
	for i := range counts.Len() {
		p := paths.Index(i)
		if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Array || p.Elem().Len() != 2 {
			spreadUnrepairable.Store(true)
			return false
		}
		tv0, n0 := p.Elem().Index(0).FieldByName("TopologyValue"), p.Elem().Index(0).FieldByName("MatchNum")
		tv1, n1 := p.Elem().Index(1).FieldByName("TopologyValue"), p.Elem().Index(1).FieldByName("MatchNum")
		if !tv0.CanSet() || !n0.CanSet() || !tv1.CanSet() || !n1.CanSet() || tv0.Kind() != reflect.String || n0.Kind() != reflect.Int {
			spreadUnrepairable.Store(true)
			return false
		}
		// The two smallest counts, as PreFilter's criticalPaths.update leaves
		// them after seeing every domain.
		first, second := pathOf{"", math.MaxInt32}, pathOf{"", math.MaxInt32}
		for value, num := range counts.Index(i).Interface().(map[string]int) {
			switch {
			case num < first.num || (num == first.num && value < first.value):
				second, first = first, pathOf{value, num}
			case num < second.num || (num == second.num && value < second.value):
				second = pathOf{value, num}
			}
		}
		tv0.SetString(first.value)
		n0.SetInt(int64(first.num))
		tv1.SetString(second.value)
		n1.SetInt(int64(second.num))
	}
	return true
}

type pathOf struct {
	value string
	num   int
}
