// Package world is the simulated cluster of one run: nodes from launch
// request to termination on each zone's spot market, pods and the workload
// controllers that keep them, the kube-scheduler's binding, a node-group
// autoscaler modelled on the cluster autoscaler, the Kubernetes API and the
// cloud provider Spotter's controllers run against, and the recorder of what
// the run costs and disrupts. It knows nothing of what runs in it: the
// strategies and the hindsight rows import it, never the other way.
package world

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/market"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/snapshot"
)

// Labels the simulated nodes carry.
const (
	ZoneLabel      = "topology.kubernetes.io/zone"
	HostnameLabel  = "kubernetes.io/hostname"
	NodeGroupLabel = "spotter.dev/sim-node-group"
	// AppLabel selects a workload's pods.
	AppLabel = "app"
)

// ErrNoCapacity is returned when a spot launch finds no capacity in its zone.
var ErrNoCapacity = errors.New("no spot capacity in the zone")

// ErrPDB is an eviction refused by a PodDisruptionBudget (HTTP 429).
var ErrPDB = errors.New("cannot evict pod as it would violate the pod's disruption budget")

type nodeState int

const (
	provisioning nodeState = iota
	ready
	terminated
	// unfulfilled is a request for a spot node the market could not hold,
	// accepted by a cloud that reports stock-outs late: no instance, nothing
	// billed; it fails at the node's FailAt and stays, failed, in its
	// group's target size until cancelled.
	unfulfilled
)

// Group is a node group of the world.
type Group struct {
	scenario.NodeGroup
	Spot  bool
	zone  *market.Zone
	cpu   int64 // millicores
	mem   int64 // bytes
	count int   // nodes not terminated
	// backoff is the autoscaler's rest of the group after failed scale-ups.
	backoff backoff.Cooldown
	// templates are the autoscaler's hypothetical new nodes of the group
	// (see World.Template), made once: the same objects from one question
	// to the next let a fit engine keep its snapshot.
	templates []*corev1.Node
}

// Node is a simulated node, from launch request to termination.
type Node struct {
	Name    string
	Group   *Group
	Obj     *corev1.Node
	state   nodeState
	Created time.Time
	ReadyAt time.Time
	// NoticeAt and TerminateAt are set by a preemption notice.
	NoticeAt, TerminateAt time.Time
	// FailAt is when an unfulfilled request is reported failed.
	FailAt     time.Time
	emptySince time.Time
	pods       []*Pod
	// Draining is the taint value of a strategy's drain ("" when none);
	// Cordoned marks the node unschedulable.
	Draining string
	Cordoned bool
	// noticeTaint is set when an interruption handler has tainted the node.
	noticeTaint bool
	// underusedSince is when the node last became a scale-down candidate
	// with pods (zero when it is not one); toBeDeleted is when the
	// autoscaler began removing it (its taint).
	underusedSince, toBeDeleted time.Time
	// What clients wrote through the simulator's API (api.go) beyond the
	// fields above: labels, annotations and taints of their own.
	apiLabels, apiAnnotations map[string]string
	apiTaints                 []corev1.Taint
}

// Spot reports whether the node is a spot node.
func (n *Node) Spot() bool { return n.Group.Spot }

// Ready reports whether the node is registered and not terminated.
func (n *Node) Ready() bool { return n.state == ready }

// Unfulfilled reports whether the node is a request the market could not
// hold, and failed whether the cloud reports it failed by now.
func (n *Node) Unfulfilled(now time.Time) (yes, failed bool) {
	yes = n.state == unfulfilled
	return yes, yes && !now.Before(n.FailAt)
}

// Noticed reports whether the node has a preemption notice.
func (n *Node) Noticed() bool { return !n.NoticeAt.IsZero() }

// Pods are the pods bound to the node (including terminating ones).
func (n *Node) Pods() []*Pod { return n.pods }

// Pod is a simulated pod.
type Pod struct {
	Obj     *corev1.Pod
	App     *App
	ordinal int
	Node    *Node
	Created time.Time
	ReadyAt time.Time
	// Terminating pods leave at goneAt.
	Terminating bool
	goneAt      time.Time
	// lost pods were on a node that terminated; they are deleted at lostUntil.
	lost      bool
	lostUntil time.Time
	// ready is set when the pod's object got its Ready condition.
	ready bool
	// unbound is a copy of Obj without its node (see Unbound).
	unbound, unboundOf *corev1.Pod
	// rejected is the scheduler's last failed attempt to place the pod.
	rejected *rejection
}

// Unbound returns a copy of the pod's object without its node: the pod as a
// scheduling question. The copy is the same object until the pod's object
// changes, so that a fit engine keeps its PodInfo.
func (p *Pod) Unbound() *corev1.Pod {
	if p.unboundOf != p.Obj {
		c := *p.Obj
		c.Spec.NodeName = ""
		p.unbound, p.unboundOf = &c, p.Obj
	}
	return p.unbound
}

// Bound reports whether the pod is bound to a node.
func (p *Pod) Bound() bool { return p.Node != nil }

// Healthy is the disruption controller's notion: Ready and not terminating.
func (p *Pod) Healthy(now time.Time) bool {
	return p.Node != nil && !p.Terminating && !p.lost && !now.Before(p.ReadyAt)
}

// App is a Deployment or StatefulSet running in the world.
type App struct {
	Name, Namespace, Kind string
	// Template is the pod every replica is made from.
	Template *corev1.Pod
	Low      int32
	Peak     int32
	// SpotEligible is false for pods that may only run on on-demand nodes.
	SpotEligible bool
	PDB          *policyv1.PodDisruptionBudget
	pods         []*Pod
	desired      int
	// evictedStarting counts the pods evicted voluntarily whose
	// replacements are not Ready yet (PDBBelowBudgetVoluntaryPodMinutes),
	// at most the workload's healthy pods short of its scale (observe).
	evictedStarting int
	seq             int
	uid             types.UID
	cpu, mem        int64
	// binds counts the app's pods bound to nodes: news for its pods that
	// wait on their topology spread.
	binds uint64
}

// Pods are the app's existing pods.
func (w *App) Pods() []*Pod { return w.pods }

// World is the simulated cluster of one strategy's run.
type World struct {
	sc *scenario.Scenario
	// Clock is the one clock of the world and of the controllers that run
	// in it: a coop.Sim, on which the controllers' goroutines run between
	// the steps.
	Clock   *coop.Sim
	start   time.Time
	rng     *rand.Rand
	zones   []*market.Zone
	Groups  []*Group
	nodes   []*Node // not terminated, by creation
	nodeSeq int
	Apps    []*App
	pods    []*Pod // existing
	nsObjs  []*corev1.Namespace
	// onDemandTaint, when set, is on every on-demand node (a strategy's
	// PreferNoSchedule taint).
	onDemandTaint *corev1.Taint
	version       uint64
	// preemptionsUntil is the elapsed time up to which the market's notices
	// are scheduled.
	preemptionsUntil time.Duration
	// nodeObjects counts the Node objects built: their resourceVersion.
	nodeObjects uint64
	// podByName indexes pods by namespace and name (unique in the world: a
	// StatefulSet recreates an ordinal only once its pod is gone).
	podByName map[types.NamespacedName]*Pod
	// byKey holds the pods in the order a LIST returns them (namespace/name,
	// snapshot.CompareKeys), kept as pods come and go: the snapshot the
	// controllers read is in that order, and the rescheduler, which sorts
	// it so, finds it sorted.
	byKey []*Pod
	// podObjects counts the Pod objects built: their resourceVersion. As in
	// the API, a pod's UID and resourceVersion name one content (the
	// planner remembers templates by them).
	podObjects  uint64
	snap        *snapshot.Snapshot
	snapVersion uint64
	m           *recorder
	classifier  *classify.Classifier
	// OnNotice, when set, hears of each preemption notice as the cloud
	// gives it: a strategy's interruption handler.
	OnNotice func(*Node)
	// OnReady, when set, hears of each node that registered (became Ready).
	OnReady func(*Node)
	// OnPod and OnOther, when set, hear of every change of what Snapshot
	// shows, as the controllers' informer handlers would: a pod added (old
	// nil), changed, or gone (pod nil); anything else (a node registered,
	// changed or gone) without detail.
	OnPod   func(old, pod *corev1.Pod)
	OnOther func()
	// schedEvents counts the events that may let a pod the scheduler
	// rejected fit: a Node object changed or gone, a bound pod gone.
	schedEvents uint64
	hasSpot     bool
	// SpotFirstGate: new pods get the spot-first scheduling gate, as the
	// chart's admission policy gives it (spotFirst.enabled).
	SpotFirstGate bool
	// OnUngated, when set, is called when an update takes a pod's last
	// scheduling gate off: the scheduler places it then, as the
	// kube-scheduler does within milliseconds, not at the next step.
	OnUngated func()
}

// New builds the world of a scenario at its start: the initial nodes
// Ready, no pods yet (the first step creates them).
func New(sc *scenario.Scenario, seed int64, onlyOnDemand bool) (*World, error) {
	start, err := time.Parse(time.RFC3339, sc.Start)
	if err != nil {
		return nil, err
	}
	w := &World{sc: sc, Clock: coop.NewSim(start), start: start, podByName: map[types.NamespacedName]*Pod{},
		rng: rand.New(rand.NewPCG(uint64(seed), 0x5107)), classifier: &classify.Classifier{}}
	for i := range sc.Zones {
		z, err := market.New(&sc.Zones[i], sc, seed+int64(i)*7919)
		if err != nil {
			return nil, err
		}
		w.zones = append(w.zones, z)
	}
	w.m = newRecorder(w)
	for i := range sc.NodeGroups {
		g := &Group{NodeGroup: sc.NodeGroups[i], Spot: sc.NodeGroups[i].CapacityType == scenario.Spot,
			cpu: sc.NodeGroups[i].CPU.MilliValue(), mem: sc.NodeGroups[i].Memory.Value()}
		if g.Spot && onlyOnDemand {
			continue
		}
		for _, z := range w.zones {
			if z.Name == g.Zone {
				g.zone = z
			}
		}
		w.Groups = append(w.Groups, g)
		w.hasSpot = w.hasSpot || g.Spot
	}
	for _, g := range w.Groups {
		for range *g.Initial {
			n := w.addNode(g)
			n.state, n.ReadyAt = ready, start
			w.refresh(n)
		}
	}
	namespaces := map[string]bool{}
	for i := range sc.Workloads {
		spec := &sc.Workloads[i]
		for k := 1; k <= int(spec.Count); k++ {
			name := spec.Name
			if spec.Count > 1 {
				name = fmt.Sprintf("%s-%d", spec.Name, k)
			}
			w.Apps = append(w.Apps, newApp(spec, name))
		}
		if !namespaces[spec.Namespace] {
			namespaces[spec.Namespace] = true
			w.nsObjs = append(w.nsObjs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spec.Namespace,
				Labels: map[string]string{"kubernetes.io/metadata.name": spec.Namespace}}})
		}
	}
	return w, nil
}

// newApp builds an app and its pod template from a scenario entry.
func newApp(spec *scenario.Workload, name string) *App {
	uid := types.UID(spec.Namespace + "/" + name)
	tmpl := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Labels: map[string]string{AppLabel: name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: spec.CPU.DeepCopy(), corev1.ResourceMemory: spec.Memory.DeepCopy()}}}}},
	}
	if spec.OnDemandOnly {
		tmpl.Spec.NodeSelector = map[string]string{classify.KarpenterCapacityLabel: scenario.OnDemand}
	}
	if spec.ZoneSpread {
		tmpl.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: ZoneLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: name}},
		}}
		if spec.MinDomains > 0 {
			tmpl.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To(spec.MinDomains)
		}
	}
	wl := &App{Name: name, Namespace: spec.Namespace, Kind: spec.Kind, Template: tmpl, Low: spec.Replicas,
		Peak: spec.PeakReplicas, SpotEligible: !spec.OnDemandOnly, uid: uid,
		cpu: spec.CPU.MilliValue(), mem: spec.Memory.Value()}
	if spec.PDB != nil {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: spec.Namespace, Generation: 1},
			Spec: policyv1.PodDisruptionBudgetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: name}},
			},
		}
		if spec.PDB.MinAvailable != nil {
			v := intstr.FromInt32(*spec.PDB.MinAvailable)
			pdb.Spec.MinAvailable = &v
		} else {
			v := intstr.FromInt32(*spec.PDB.MaxUnavailable)
			pdb.Spec.MaxUnavailable = &v
		}
		wl.PDB = pdb
	}
	return wl
}

// Now is the simulated time.
func (w *World) Now() time.Time { return w.Clock.Now() }

// Elapsed is the simulated time since the start.
func (w *World) Elapsed() time.Duration { return w.Now().Sub(w.start) }

// changed records a change that can alter a scheduling or planning answer.
func (w *World) changed() { w.version++ }

// Version counts the changes so far: equal versions, equal answers.
func (w *World) Version() uint64 { return w.version }

// Nodes are the nodes not terminated, provisioning ones included.
func (w *World) Nodes() []*Node { return w.nodes }

// ReadyNodes are the registered nodes.
func (w *World) ReadyNodes() []*Node {
	out := make([]*Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		if n.Ready() {
			out = append(out, n)
		}
	}
	return out
}

// AllPods are the existing pods.
func (w *World) AllPods() []*Pod { return w.pods }

// addNode launches a node of g (provisioning).
func (w *World) addNode(g *Group) *Node {
	w.nodeSeq++
	n := &Node{Name: fmt.Sprintf("%s-%04d", g.Name, w.nodeSeq), Group: g, Created: w.Now(),
		ReadyAt: w.Now().Add(g.ProvisioningTime.Duration), state: provisioning}
	g.count++
	w.nodes = append(w.nodes, n)
	w.refresh(n)
	w.changed()
	return n
}

// Launch asks node group g for a node. When its zone holds as many spot
// nodes as the market allows now, a spot group fails with ErrNoCapacity, or,
// in a zone whose cloud reports stock-outs late, accepts the request and
// fails it then (an unfulfilled node).
func (w *World) Launch(g *Group) (*Node, error) {
	if g.count >= int(g.Max) {
		return nil, fmt.Errorf("node group %s is at its maximum size %d", g.Name, g.Max)
	}
	if g.Spot && w.spotNodes(g.zone) >= g.zone.Capacity(w.Elapsed()) {
		if g.zone.StockOutDelay == 0 {
			return nil, ErrNoCapacity
		}
		n := w.addNode(g)
		n.state, n.FailAt = unfulfilled, w.Now().Add(g.zone.StockOutDelay)
		w.m.stockOuts++
		// The failure is news: the migrator reads it, and the
		// autoscaler's options change.
		w.Clock.AfterFunc(g.zone.StockOutDelay, w.changed)
		return n, nil
	}
	w.m.launched++
	return w.addNode(g), nil
}

// PricePerHour is what a node of g costs per hour now: the group's price,
// which for a spot group in a zone whose trace has prices follows them (the
// group's price is then the mean, each tick's price relative to the trace's
// mean scales it).
func (w *World) PricePerHour(g *Group) float64 {
	if !g.Spot || g.zone == nil {
		return g.PricePerHour
	}
	return g.PricePerHour * g.zone.PriceFactor(w.Elapsed())
}

// spotNodes counts the zone's spot nodes not terminated, requests the
// market could not hold left out.
func (w *World) spotNodes(z *market.Zone) int {
	count := 0
	for _, n := range w.nodes {
		if n.Group.Spot && n.Group.zone == z && n.state != unfulfilled {
			count++
		}
	}
	return count
}

// DeleteNode deletes a node's instance now; pods still on it are lost.
func (w *World) DeleteNode(n *Node) {
	w.terminate(n)
}

// terminate ends a node: billing stops, its pods are lost until the node loss
// is detected.
func (w *World) terminate(n *Node) {
	if n.state == terminated {
		return
	}
	n.state = terminated
	n.Group.count--
	w.schedEvents++ // a zone without nodes leaves the topology spread
	w.m.nodeEnded(n)
	for _, p := range slices.Clone(n.pods) {
		if p.Terminating {
			w.removePod(p)
			continue
		}
		w.podChanged(p.Obj, nil)
		p.lost = true
		p.lostUntil = w.Now().Add(w.sc.Cluster.NodeLossDetection.Duration)
		p.Node = nil
	}
	n.pods = nil
	w.nodes = slices.DeleteFunc(w.nodes, func(x *Node) bool { return x == n })
	w.otherChanged()
	w.changed()
}

// podChanged tells OnPod of a change of a pod the snapshot shows.
func (w *World) podChanged(old, pod *corev1.Pod) {
	if w.OnPod != nil {
		w.OnPod(old, pod)
	}
}

// otherChanged tells OnOther of a change of the snapshot other than a pod's.
func (w *World) otherChanged() {
	if w.OnOther != nil {
		w.OnOther()
	}
}

// Cordon marks a node unschedulable, or schedulable again.
func (w *World) Cordon(n *Node, on bool) {
	if n.Cordoned != on {
		n.Cordoned = on
		w.refresh(n)
	}
}

// SetDraining sets (value != "") or removes a strategy's NoSchedule taint.
func (w *World) SetDraining(n *Node, value string) {
	if n.Draining != value {
		n.Draining = value
		w.refresh(n)
	}
}

// TaintNotice taints a noticed node as an interruption handler does.
func (w *World) TaintNotice(n *Node) {
	if !n.noticeTaint {
		n.noticeTaint = true
		n.Cordoned = true
		w.refresh(n)
	}
}

// refresh rebuilds the Node object after a change.
func (w *World) refresh(n *Node) {
	old := n.Obj
	n.Obj = w.nodeObject(n)
	if n.state == ready && mayAdmitMore(old, n.Obj) {
		w.schedEvents++
	}
	w.otherChanged()
	w.changed()
}

// nodeObject builds the Node object of n as it stands.
func (w *World) nodeObject(n *Node) *corev1.Node {
	labels := maps.Clone(n.apiLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, w.ownLabels(n))
	w.nodeObjects++
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID(n.Name), CreationTimestamp: metav1.NewTime(n.Created), Labels: labels,
			Annotations: maps.Clone(n.apiAnnotations), ResourceVersion: strconv.FormatUint(w.nodeObjects, 10)},
		Spec: corev1.NodeSpec{Unschedulable: n.Cordoned},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.Group.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.Group.mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(n.Group.Pods), resource.DecimalSI),
	}
	obj.Status.Capacity, obj.Status.Allocatable = rl, rl
	if !n.Group.Spot && w.onDemandTaint != nil {
		obj.Spec.Taints = append(obj.Spec.Taints, *w.onDemandTaint)
	}
	// The taints are the drain engine's and the agent's own: a drain's (its
	// value names the component), and the agent's on a termination notice (the
	// notice's kind; NoSchedule, with the cordon).
	if n.Draining != "" {
		obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: drain.DrainingTaintKey, Value: n.Draining, Effect: corev1.TaintEffectNoSchedule})
	}
	if !n.toBeDeleted.IsZero() {
		obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: toBeDeletedTaint, Value: strconv.FormatInt(n.toBeDeleted.Unix(), 10), Effect: corev1.TaintEffectNoSchedule})
	}
	if n.noticeTaint {
		obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: interrupt.TaintKey, Value: string(notice.Termination), Effect: corev1.TaintEffectNoSchedule})
	}
	obj.Spec.Taints = append(obj.Spec.Taints, n.apiTaints...)
	return obj
}

// ownLabels are the labels the world gives n's object.
func (w *World) ownLabels(n *Node) map[string]string {
	capType := scenario.OnDemand
	if n.Group.Spot {
		capType = scenario.Spot
	}
	return map[string]string{HostnameLabel: n.Name, ZoneLabel: n.Group.Zone, plan.InstanceTypeLabel: n.Group.InstanceType,
		classify.KarpenterCapacityLabel: capType, NodeGroupLabel: n.Group.Name}
}

// SetOnDemandTaint puts taint on every on-demand node (nil: none).
func (w *World) SetOnDemandTaint(t *corev1.Taint) {
	w.onDemandTaint = t
	for _, n := range w.nodes {
		w.refresh(n)
	}
	for _, g := range w.Groups {
		g.templates = nil
	}
}

// createPod creates a pending pod of wl.
func (w *World) createPod(wl *App, ordinal int) *Pod {
	name := wl.Name + "-" + strconv.Itoa(ordinal)
	if wl.Kind == scenario.Deployment {
		wl.seq++
		name = fmt.Sprintf("%s-%05d", wl.Name, wl.seq)
	}
	obj := wl.Template.DeepCopy()
	obj.Name = name
	obj.UID = types.UID(wl.Namespace + "/" + name + "/" + strconv.Itoa(int(w.version)))
	owner := "ReplicaSet"
	if wl.Kind == scenario.StatefulSet {
		owner = scenario.StatefulSet
	}
	obj.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: owner, Name: wl.Name, UID: wl.uid, Controller: ptrTrue()}}
	obj.CreationTimestamp = metav1.NewTime(w.Now())
	obj.Status.Phase = corev1.PodPending
	if w.SpotFirstGate {
		obj.Spec.SchedulingGates = append(obj.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: spotfirst.GateName})
	}
	w.revise(obj)
	p := &Pod{Obj: obj, App: wl, ordinal: ordinal, Created: w.Now()}
	wl.pods = append(wl.pods, p)
	w.pods = append(w.pods, p)
	w.podByName[types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}] = p
	i, _ := slices.BinarySearchFunc(w.byKey, obj, byKey)
	w.byKey = slices.Insert(w.byKey, i, p)
	w.podChanged(nil, obj)
	w.changed()
	return p
}

func ptrTrue() *bool { b := true; return &b }

// revise gives a new version of a pod object its resourceVersion.
// mayAdmitMore reports whether a Node object changed so that a pod it
// rejected may fit now: as the queueing hints of the kube-scheduler's plugins
// ask (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), it
// was not registered before, was uncordoned, lost a taint, changed labels or
// gained allocatable.
func mayAdmitMore(old, n *corev1.Node) bool {
	switch {
	case old == nil || old.Spec.Unschedulable && !n.Spec.Unschedulable:
		return true
	case !maps.Equal(old.Labels, n.Labels):
		return true
	}
	for i := range old.Spec.Taints {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&old.Spec.Taints[i]) }) {
			return true
		}
	}
	return n.Status.Allocatable.Cpu().Cmp(*old.Status.Allocatable.Cpu()) > 0 ||
		n.Status.Allocatable.Memory().Cmp(*old.Status.Allocatable.Memory()) > 0
}

func (w *World) revise(obj *corev1.Pod) {
	w.podObjects++
	obj.ResourceVersion = strconv.FormatUint(w.podObjects, 10)
}

// bind puts a pending pod on a node.
func (w *World) bind(p *Pod, n *Node) {
	old, obj := p.Obj, *p.Obj
	obj.Spec.NodeName = n.Name
	obj.Status.Phase = corev1.PodRunning
	w.revise(&obj)
	p.Obj = &obj
	w.podChanged(old, p.Obj)
	p.Node = n
	p.rejected = nil
	p.App.binds++
	p.ReadyAt = w.Now().Add(w.sc.Cluster.PodStartup.Duration)
	n.pods = append(n.pods, p)
	n.emptySince = time.Time{}
	w.changed()
	if !w.Now().Before(p.ReadyAt) {
		w.markReady(p)
	}
}

// markReady records that a bound pod became Ready (podStartup after its
// binding): its object gets the Ready condition, and the world a change, since
// PodDisruptionBudget status (and so every plan) depends on it.
func (w *World) markReady(p *Pod) {
	old, obj := p.Obj, *p.Obj
	obj.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(p.ReadyAt)}}
	w.revise(&obj)
	p.Obj = &obj
	if !p.lost {
		w.podChanged(old, p.Obj)
	}
	p.ready = true
	if p.App.evictedStarting > 0 {
		p.App.evictedStarting--
	}
	w.changed()
}

// startTermination marks a pod terminating; it leaves after the grace period
// (at once when pending or lost).
func (w *World) startTermination(p *Pod) { w.terminatePod(p, w.sc.Cluster.GracePeriod.Duration) }

// terminatePod marks a pod terminating; it leaves after grace (at once when
// pending or lost).
func (w *World) terminatePod(p *Pod, grace time.Duration) {
	if p.Terminating {
		return
	}
	p.Terminating = true
	p.goneAt = w.Now().Add(grace)
	old, obj := p.Obj, *p.Obj
	ts := metav1.NewTime(w.Now())
	obj.DeletionTimestamp = &ts
	w.revise(&obj)
	p.Obj = &obj
	if !p.lost {
		w.podChanged(old, p.Obj)
	}
	if p.Node == nil {
		w.removePod(p)
	}
	w.changed()
}

// byKey orders a pod against an object by their keys.
func byKey(p *Pod, obj *corev1.Pod) int {
	return snapshot.CompareKeys(p.Obj.Namespace, p.Obj.Name, obj.Namespace, obj.Name)
}

// removePod deletes a pod from the world.
func (w *World) removePod(p *Pod) {
	if n := p.Node; n != nil {
		w.schedEvents++
		n.pods = slices.DeleteFunc(n.pods, func(x *Pod) bool { return x == p })
		p.Node = nil
	}
	p.App.pods = slices.DeleteFunc(p.App.pods, func(x *Pod) bool { return x == p })
	w.pods = slices.DeleteFunc(w.pods, func(x *Pod) bool { return x == p })
	delete(w.podByName, types.NamespacedName{Namespace: p.Obj.Namespace, Name: p.Obj.Name})
	if i, found := slices.BinarySearchFunc(w.byKey, p.Obj, byKey); found && w.byKey[i] == p {
		w.byKey = slices.Delete(w.byKey, i, i+1)
	} else {
		w.byKey = slices.DeleteFunc(w.byKey, func(x *Pod) bool { return x == p })
	}
	if !p.lost {
		w.podChanged(p.Obj, nil)
	}
	w.changed()
}

// Evict is the Eviction API: a pod that is Ready is evicted only when its
// PodDisruptionBudget allows one more disruption (else ErrPDB, as HTTP 429); a
// pod not yet Ready is evicted only when the budget's application is not
// disrupted (the default unhealthyPodEvictionPolicy IfHealthyBudget); a
// pending pod always. by names the strategy component, for the metrics.
func (w *World) Evict(p *Pod, by string) error {
	return w.evict(p, by, w.sc.Cluster.GracePeriod.Duration)
}

// evict is Evict with the pod's grace period.
func (w *World) evict(p *Pod, by string, grace time.Duration) error {
	if p.Terminating {
		return nil
	}
	now := w.Now()
	if p.App.PDB != nil && p.Node != nil {
		healthy, desired := w.PDBHealth(p.App)
		switch {
		case p.Healthy(now) && healthy-desired <= 0, !p.Healthy(now) && healthy < desired:
			w.m.evictionRefused(by)
			return ErrPDB
		}
	}
	w.evictNow(p, by, grace)
	return nil
}

// forceEvict evicts without the budget check: only tests call it directly, to
// check that violations are seen.
func (w *World) forceEvict(p *Pod, by string) { w.evictNow(p, by, w.sc.Cluster.GracePeriod.Duration) }

// evictNow evicts p, whatever its budget says.
func (w *World) evictNow(p *Pod, by string, grace time.Duration) {
	w.terminatePod(p, grace)
	w.m.voluntaryEviction(p, by)
	if p.App.PDB != nil {
		if healthy, desired := w.PDBHealth(p.App); healthy < desired {
			w.m.pdbViolation(p.App)
		}
	}
}

// UpdatePod replaces an unbound pod's object by obj, as an update through
// the API (the caller checked its resourceVersion): of a pod's spec only what
// the API lets a client change before the pod is bound, its scheduling gates
// and, while it is gated, its node selector, may differ.
func (w *World) UpdatePod(p *Pod, obj *corev1.Pod) error {
	old := p.Obj
	if p.Node != nil || p.Terminating {
		return fmt.Errorf("pod %s/%s: the simulator updates only pending pods", old.Namespace, old.Name)
	}
	a, b := old.Spec.DeepCopy(), obj.Spec.DeepCopy()
	a.SchedulingGates, b.SchedulingGates, a.NodeSelector, b.NodeSelector = nil, nil, nil, nil
	if !equality.Semantic.DeepEqual(a, b) || len(old.Spec.SchedulingGates) == 0 && !maps.Equal(old.Spec.NodeSelector, obj.Spec.NodeSelector) {
		return fmt.Errorf("pod %s/%s: only a pending pod's scheduling gates and, while gated, its node selector may change", old.Namespace, old.Name)
	}
	next := obj.DeepCopy()
	next.Status = old.Status
	w.revise(next)
	p.Obj = next
	w.podChanged(old, next)
	w.changed()
	if len(old.Spec.SchedulingGates) > 0 && len(next.Spec.SchedulingGates) == 0 && w.OnUngated != nil {
		w.OnUngated()
	}
	return nil
}

// DeletePod deletes a pod without the Eviction API (an interruption handler's
// last resort before the node goes).
func (w *World) DeletePod(p *Pod) { w.startTermination(p) }

// PDBHealth returns a budget's current and desired healthy counts, as the
// disruption controller computes them (expected pods: the workload's scale).
func (w *World) PDBHealth(wl *App) (healthy, desired int) {
	now := w.Now()
	for _, p := range wl.pods {
		if p.Healthy(now) {
			healthy++
		}
	}
	spec := wl.PDB.Spec
	if spec.MinAvailable != nil {
		// Percentages round up, as the disruption controller does.
		desired, _ = intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, wl.desired, true)
	} else if spec.MaxUnavailable != nil {
		unavailable, _ := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, wl.desired, true)
		desired = max(wl.desired-unavailable, 0)
	}
	return healthy, desired
}

// PDBAllows is the budget's disruptionsAllowed (a large number without one).
func (w *World) PDBAllows(wl *App) int {
	if wl.PDB == nil {
		return math.MaxInt32
	}
	healthy, desired := w.PDBHealth(wl)
	return max(healthy-desired, 0)
}

// Snapshot is the world as the planner reads it: the registered nodes, the
// pods (pending and terminating included; in the order a LIST returns
// them), the PodDisruptionBudgets with the
// status the disruption controller would give them, and the namespaces. It is
// cached until the world changes.
func (w *World) Snapshot() *snapshot.Snapshot {
	if w.snap != nil && w.snapVersion == w.version {
		return w.snap
	}
	s := &snapshot.Snapshot{Namespaces: w.nsObjs}
	for _, n := range w.nodes {
		if n.Ready() {
			s.Nodes = append(s.Nodes, n.Obj)
		}
	}
	for _, p := range w.byKey {
		if !p.lost {
			s.Pods = append(s.Pods, p.Obj)
		}
	}
	for _, wl := range w.Apps {
		if wl.PDB == nil {
			continue
		}
		pdb := wl.PDB.DeepCopy()
		healthy, desired := w.PDBHealth(wl)
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: int32(healthy),
			DesiredHealthy: int32(desired), ExpectedPods: int32(wl.desired), DisruptionsAllowed: int32(max(healthy-desired, 0))}
		s.PDBs = append(s.PDBs, pdb)
	}
	w.snap, w.snapVersion = s, w.version
	return s
}

// PodByName finds the world's pod of a plan's pod name.
func (w *World) PodByName(namespace, name string) *Pod {
	return w.podByName[types.NamespacedName{Namespace: namespace, Name: name}]
}

// NodeByName finds a node not terminated.
func (w *World) NodeByName(name string) *Node {
	for _, n := range w.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
