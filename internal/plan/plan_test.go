package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// pod is a running, ReplicaSet-owned pod on node requesting cpu.
func pod(name, node, cpu string, opts ...tu.PodOption) *corev1.Pod {
	base := []tu.PodOption{tu.WithUID(), tu.OnNode(node), tu.OwnedBy("ReplicaSet", "rs-"+name), tu.CPU(cpu), tu.Phase(corev1.PodRunning)}
	return tu.Pod(name, append(base, opts...)...)
}

func pdb(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	p := tu.PDB(name, app, tu.MaxUnavailable(1))
	p.Generation, p.Status.ObservedGeneration, p.Status.DisruptionsAllowed = 1, 1, allowed
	return p
}

func plan(t *testing.T, rules Rules, s *snapshot.Snapshot) *Plan {
	t.Helper()
	p, err := New(Options{Rules: rules}).Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func node(p *Plan, name string) NodePlan {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return NodePlan{Name: "missing " + name}
}

func destinations(n NodePlan) map[string]string {
	out := map[string]string{}
	for _, p := range n.Pods {
		out[p.Name] = p.Destination
	}
	return out
}

func TestPlanDrainableNode(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pod("a", "od", "1"), pod("b", "od", "500m")},
	}
	p := plan(t, Rules{}, s)
	od := node(p, "od")
	if !od.Drainable || od.Reason != "" {
		t.Fatalf("od: drainable=%v reason=%q", od.Drainable, od.Reason)
	}
	if d := destinations(od); d["a"] != "spot" || d["b"] != "spot" {
		t.Errorf("destinations %v", d)
	}
	if p.Summary.DrainableNodes != 1 || p.Summary.OnDemandNodes != 1 || p.Summary.SpotNodes != 1 || p.Summary.PodsToMove != 2 {
		t.Errorf("summary %+v", p.Summary)
	}
	if sp := node(p, "spot"); sp.Class != "spot" || sp.Drainable {
		t.Errorf("spot node: %+v", sp)
	}
	// The input is not modified.
	if s.Pods[0].Spec.NodeName != "od" {
		t.Error("Plan modified the snapshot")
	}
}

func TestPlanReasons(t *testing.T) {
	spotTaint := tu.Taint("spot", "true", corev1.TaintEffectNoSchedule)
	cases := []struct {
		name  string
		rules Rules
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  string // the on-demand node "od" is not drainable for this reason
	}{
		{"no spot capacity", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot(), tu.Capacity("1", "16Gi"))},
			[]*corev1.Pod{pod("a", "od", "2")}, "pod default/a: 0/1 spot nodes fit: 1 NodeResourcesFit: Insufficient cpu"},
		{"untolerated spot taint", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot(), spotTaint)},
			[]*corev1.Pod{pod("a", "od", "1")}, "pod default/a: 0/1 spot nodes fit: 1 TaintToleration: node(s) had untolerated taint(s)"},
		{"cordoned spot node", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot(), tu.Cordoned())},
			[]*corev1.Pod{pod("a", "od", "1")}, "pod default/a: 0/1 spot nodes fit: 1 NodeUnschedulable: node(s) were unschedulable"},
		{"pinned to on-demand", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.RequireNodeLabel("karpenter.sh/capacity-type", "on-demand"))},
			"pod default/a: 0/1 spot nodes fit: 1 NodeAffinity: node(s) didn't match Pod's node affinity/selector"},
		{"host port taken", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.HostPort(8080)), pod("b", "spot", "1", tu.HostPort(8080))},
			"pod default/a: 0/1 spot nodes fit: 1 NodePorts: node(s) didn't have free ports for the requested pod ports"},
		{"do-not-move", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.Annotation(DoNotMoveKey, "true"))}, "pod default/a: annotation spotter.dev/do-not-move=true"},
		{"karpenter do-not-disrupt", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.Annotation(KarpenterDoNotDisrupt, "true"))}, "pod default/a: annotation karpenter.sh/do-not-disrupt=true"},
		{"safe-to-evict false", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.Annotation(SafeToEvictAnnotation, "false"))}, "pod default/a: annotation cluster-autoscaler.kubernetes.io/safe-to-evict=false"},
		{"no controller", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{tu.Pod("bare", tu.WithUID(), tu.OnNode("od"), tu.Phase(corev1.PodRunning))}, "pod default/bare: no controller owns it"},
		{"local storage", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
			[]*corev1.Pod{pod("a", "od", "1", tu.EmptyDir("scratch"))}, `pod default/a: local storage in volume "scratch" would be lost`},
		{"no spot nodes", Rules{}, []*corev1.Node{tu.Node("od", tu.OnDemand())},
			[]*corev1.Pod{pod("a", "od", "1")}, "pod default/a: no spot nodes in the cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.rules, &snapshot.Snapshot{Nodes: tc.nodes, Pods: tc.pods})
			od := node(p, "od")
			if od.Drainable || !strings.HasPrefix(od.Reason, tc.want) {
				t.Errorf("drainable=%v reason:\n got %q\nwant %q...", od.Drainable, od.Reason, tc.want)
			}
		})
	}
}

func TestMovabilityOverrides(t *testing.T) {
	nodes := []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())}
	cases := []struct {
		name  string
		rules Rules
		pod   *corev1.Pod
	}{
		{"bare pod allowed by rules", Rules{AllowUnreplicated: true}, tu.Pod("bare", tu.WithUID(), tu.OnNode("od"), tu.Phase(corev1.PodRunning))},
		{"bare pod annotated safe", Rules{}, tu.Pod("bare", tu.WithUID(), tu.OnNode("od"), tu.Annotation(SafeToEvictAnnotation, "true"))},
		{"local storage allowed by rules", Rules{AllowLocalStorage: true}, pod("a", "od", "1", tu.EmptyDir("scratch"))},
		{"local volume listed as safe", Rules{}, pod("a", "od", "1", tu.EmptyDir("scratch"), tu.Annotation(SafeToEvictLocalVolumes, "cache, scratch"))},
		{"memory emptyDir", Rules{}, func() *corev1.Pod {
			p := pod("a", "od", "1")
			p.Spec.Volumes = []corev1.Volume{{Name: "m", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
			return p
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.rules, &snapshot.Snapshot{Nodes: nodes, Pods: []*corev1.Pod{tc.pod}})
			if od := node(p, "od"); !od.Drainable {
				t.Errorf("not drainable: %s", od.Reason)
			}
		})
	}
}

// DaemonSet, static and finished pods stay and use no capacity; terminating pods
// are waited for.
func TestIgnoredAndWaitedPods(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot(), tu.Capacity("1", "16Gi"))},
		Pods: []*corev1.Pod{
			pod("ds", "od", "3", tu.OwnedBy("DaemonSet", "logs")),
			pod("static", "od", "3", tu.Annotation(corev1.MirrorPodAnnotationKey, "x")),
			pod("done", "od", "3", tu.Phase(corev1.PodSucceeded)),
			pod("leaving", "od", "3", tu.Terminating()),
			pod("web", "od", "500m"),
		},
	}
	p := plan(t, Rules{}, s)
	od := node(p, "od")
	if !od.Drainable {
		t.Fatalf("not drainable: %s", od.Reason)
	}
	actions := map[string]string{}
	for _, pp := range od.Pods {
		actions[pp.Name] = pp.Action
	}
	want := map[string]string{"ds": "ignore", "static": "ignore", "done": "ignore", "leaving": "wait", "web": "move"}
	for k, v := range want {
		if actions[k] != v {
			t.Errorf("pod %s: action %q, want %q", k, actions[k], v)
		}
	}
	if p.Summary.PodsToMove != 1 {
		t.Errorf("podsToMove = %d", p.Summary.PodsToMove)
	}
}

// A PodDisruptionBudget's allowance is shared by every node of the plan.
func TestPDBBudgetAcrossNodes(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("spot", tu.Spot(), tu.Capacity("16", "64Gi"))},
		Pods: []*corev1.Pod{
			pod("web-1", "od-1", "1", tu.WithLabels("app", "web")),
			pod("web-2", "od-2", "1", tu.WithLabels("app", "web")),
			pod("web-3", "spot", "1", tu.WithLabels("app", "web")),
		},
		PDBs: []*policyv1.PodDisruptionBudget{pdb("web", "web", 1)},
	}
	p := plan(t, Rules{}, s)
	first, second := node(p, "od-1"), node(p, "od-2")
	if !first.Drainable {
		t.Fatalf("od-1 not drainable: %s", first.Reason)
	}
	want := "pod default/web-2: PodDisruptionBudget default/web allows 1 disruption(s) at a time, all taken by the drains of other nodes in this plan"
	if second.Drainable || second.Reason != want {
		t.Errorf("od-2: drainable=%v\n got %q\nwant %q", second.Drainable, second.Reason, want)
	}

	// A budget that allows nothing now blocks every node.
	s.PDBs = []*policyv1.PodDisruptionBudget{pdb("web", "web", 0)}
	p = plan(t, Rules{}, s)
	want = "pod default/web-1: PodDisruptionBudget default/web allows no disruption now (status.disruptionsAllowed is 0)"
	if n := node(p, "od-1"); n.Drainable || n.Reason != want {
		t.Errorf("od-1 under a budget of 0: drainable=%v\n got %q\nwant %q", n.Drainable, n.Reason, want)
	}

	// A budget whose status is stale allows nothing.
	stale := pdb("web", "web", 5)
	stale.Generation = 2
	s.PDBs = []*policyv1.PodDisruptionBudget{stale}
	p = plan(t, Rules{}, s)
	if n := node(p, "od-1"); n.Drainable || !strings.Contains(n.Reason, "status not yet computed") {
		t.Errorf("stale budget: %v %q", n.Drainable, n.Reason)
	}
}

// The layout of most clusters: a Deployment of 6 under a budget of one, three
// replicas on each of two on-demand nodes. The emptier node drains in three
// waves of one; the other waits for the next plan, as the drain of the first
// takes the budget's only disruption. Pods under no budget go in the first
// wave; a budget allowing two spreads its four pods over two waves, and a pod
// under both budgets waits for a wave in which both have room.
func TestPDBWaves(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand(), tu.Capacity("8", "32Gi")),
			tu.Node("spot", tu.Spot(), tu.Capacity("32", "64Gi"))},
		PDBs: []*policyv1.PodDisruptionBudget{pdb("web", "web", 1)},
	}
	for i := range 6 {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("od-%d", 1+i%2), "1", tu.OwnedBy("ReplicaSet", "web"), tu.WithLabels("app", "web")))
	}
	s.Pods = append(s.Pods, pod("free", "od-1", "500m"))
	p := plan(t, Rules{}, s)
	first, second := node(p, "od-2"), node(p, "od-1") // od-2 is the larger, so the emptier
	if !first.Drainable || first.Waves != 3 {
		t.Fatalf("od-2: drainable=%v waves=%d (%s), want drainable in 3 waves", first.Drainable, first.Waves, first.Reason)
	}
	if got := wavesOf(first); got != "web-1:1 web-3:2 web-5:3" {
		t.Errorf("od-2 waves: %s", got)
	}
	if second.Drainable || !strings.Contains(second.Reason, "all taken by the drains of other nodes in this plan") {
		t.Errorf("od-1: drainable=%v %q; the budget's one disruption belongs to od-2's drain", second.Drainable, second.Reason)
	}
	if p.Summary.DrainableNodes != 1 || p.Summary.PodsToMove != 3 {
		t.Errorf("summary %+v", p.Summary)
	}

	// Once od-2 is empty (its pods on spot), od-1 drains in three waves; the
	// pod under no budget goes first.
	for _, pod := range s.Pods {
		if pod.Spec.NodeName == "od-2" {
			pod.Spec.NodeName = "spot"
		}
	}
	p = plan(t, Rules{}, s)
	if n := node(p, "od-1"); !n.Drainable || n.Waves != 3 || wavesOf(n) != "web-0:1 web-2:2 web-4:3 free:1" {
		t.Errorf("od-1: drainable=%v waves=%d %s (%s)", n.Drainable, n.Waves, wavesOf(n), n.Reason)
	}

	// Two budgets: "web" allows 2 at a time, "tier" (covering web-0 and
	// web-2 and nothing else) allows 1.
	web, tier := pdb("web", "web", 2), pdb("tier", "x", 1)
	tier.Spec.Selector.MatchLabels = map[string]string{"tier": "front"}
	s.PDBs = []*policyv1.PodDisruptionBudget{web, tier}
	for _, pod := range s.Pods {
		pod.Spec.NodeName = "od-1"
		if pod.Name == "web-0" || pod.Name == "web-2" {
			pod.Labels["tier"] = "front"
		}
	}
	p = plan(t, Rules{}, s)
	// In placement order (largest first, then by name): web-0 wave 1; web-1
	// wave 1 (web is full there); web-2 needs tier's room: wave 2; web-3 wave
	// 2; web-4 and web-5 wave 3.
	if n := node(p, "od-1"); !n.Drainable || n.Waves != 3 || wavesOf(n) != "web-0:1 web-1:1 web-2:2 web-3:2 web-4:3 web-5:3 free:1" {
		t.Errorf("two budgets: drainable=%v waves=%d %s (%s)", n.Drainable, n.Waves, wavesOf(n), n.Reason)
	}
}

// Nodes that would drain in waves are planned after the others, so that
// they never take a budget from nodes that drain at once: od-a, the emptiest,
// holds two pods of web and two of api (budgets of one each); od-b one of web,
// od-c one of api. Emptiest first alone would drain od-a and block the other
// two.
func TestWavesPlannedLast(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od-a", tu.OnDemand(), tu.Capacity("64", "256Gi")), tu.Node("od-b", tu.OnDemand()), tu.Node("od-c", tu.OnDemand()),
			tu.Node("spot", tu.Spot(), tu.Capacity("32", "64Gi"))},
		PDBs: []*policyv1.PodDisruptionBudget{pdb("web", "web", 1), pdb("api", "api", 1)},
	}
	for i, at := range []string{"od-a", "od-a", "od-b"} {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("web-%d", i), at, "1", tu.OwnedBy("ReplicaSet", "web"), tu.WithLabels("app", "web")))
	}
	for i, at := range []string{"od-a", "od-a", "od-c"} {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("api-%d", i), at, "1", tu.OwnedBy("ReplicaSet", "api"), tu.WithLabels("app", "api")))
	}
	p := plan(t, Rules{}, s)
	if a, b, c := node(p, "od-a"), node(p, "od-b"), node(p, "od-c"); a.Drainable || !b.Drainable || !c.Drainable {
		t.Errorf("drainable: od-a %v (%s), od-b %v (%s), od-c %v (%s); want od-b and od-c", a.Drainable, a.Reason, b.Drainable, b.Reason, c.Drainable, c.Reason)
	}
	if p.Nodes[0].Name != "od-a" {
		t.Errorf("the nodes are listed emptiest first, as before: %s first", p.Nodes[0].Name)
	}
}

func wavesOf(n NodePlan) string {
	var out []string
	for _, p := range n.Pods {
		if p.Action == "move" {
			out = append(out, fmt.Sprintf("%s:%d", p.Name, p.Wave))
		}
	}
	return strings.Join(out, " ")
}

// Spot capacity used by one node's pods is not available to the next node's.
func TestCapacityCommittedAcrossNodes(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pod("a", "od-1", "3"), pod("b", "od-2", "2500m")},
	}
	p := plan(t, Rules{}, s)
	// od-2 is the emptier one, so it goes first and takes the spot capacity.
	if p.Nodes[0].Name != "od-2" || !p.Nodes[0].Drainable {
		t.Fatalf("first candidate %s drainable=%v (%s)", p.Nodes[0].Name, p.Nodes[0].Drainable, p.Nodes[0].Reason)
	}
	if n := node(p, "od-1"); n.Drainable || !strings.Contains(n.Reason, "Insufficient cpu") {
		t.Errorf("od-1: %v %q", n.Drainable, n.Reason)
	}
}

// Pending pods get the spot capacity first.
func TestPendingPodsReserveSpotCapacity(t *testing.T) {
	pending := tu.Pod("pending", tu.WithUID(), tu.OwnedBy("ReplicaSet", "p"), tu.CPU("3"))
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pod("a", "od", "2"), pending},
	}
	p := plan(t, Rules{}, s)
	if n := node(p, "od"); n.Drainable {
		t.Errorf("od drainable although a Pending pod needs the spot capacity")
	}
	if p.Summary.PendingReserved != 1 {
		t.Errorf("pendingReserved = %d", p.Summary.PendingReserved)
	}
	if pending.Spec.NodeName != "" {
		t.Error("Plan modified a pending pod")
	}
}

// Anti-affinity sees pods placed earlier in the same plan.
func TestAffinityStateCommitted(t *testing.T) {
	anti := tu.AntiAffinity("db", "kubernetes.io/hostname")
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods: []*corev1.Pod{
			pod("db-1", "od-1", "1", tu.WithLabels("app", "db"), anti),
			pod("db-2", "od-2", "1", tu.WithLabels("app", "db"), anti),
		},
	}
	p := plan(t, Rules{}, s)
	drainable := 0
	for _, n := range p.Nodes {
		if n.Drainable {
			drainable++
		} else if n.Class == "on-demand" && !strings.Contains(n.Reason, "InterPodAffinity") {
			t.Errorf("%s: reason %q, want an InterPodAffinity rejection", n.Name, n.Reason)
		}
	}
	if drainable != 1 {
		t.Errorf("%d nodes drainable, want 1: the second db pod cannot share the spot node", drainable)
	}
}

func TestControlPlaneAndExcludedAreNotCandidates(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{
			tu.Node("cp", tu.NodeLabel("node-role.kubernetes.io/control-plane", ""), tu.Spot()),
			tu.Node("ex", tu.OnDemand(), tu.NodeLabel("spotter.dev/exclude", "true")),
			tu.Node("spot", tu.Spot()),
		},
		Pods: []*corev1.Pod{pod("a", "cp", "1"), pod("b", "ex", "1")},
	}
	p := plan(t, Rules{}, s)
	for _, name := range []string{"cp", "ex"} {
		if n := node(p, name); n.Drainable || len(n.Pods) != 0 || !strings.HasSuffix(n.Reason, "node: never drained") {
			t.Errorf("%s: %+v", name, n)
		}
	}
	if len(p.Summary.Warnings) != 1 || !strings.Contains(p.Summary.Warnings[0], "cp: control-plane node looks like spot") {
		t.Errorf("warnings %v", p.Summary.Warnings)
	}
}

// With prices, the summary gives the on-demand price of the drainable nodes.
func TestHourlySaving(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{
			tu.Node("od-1", tu.OnDemand(), tu.NodeLabel(InstanceTypeLabel, "m5.xlarge")),
			tu.Node("od-2", tu.OnDemand(), tu.NodeLabel(InstanceTypeLabel, "m5.xlarge")),
			tu.Node("spot", tu.Spot(), tu.NodeLabel(InstanceTypeLabel, "m5.xlarge")),
		},
		Pods: []*corev1.Pod{pod("a", "od-1", "1"), pod("b", "od-2", "1", tu.Annotation(DoNotMoveKey, "true"))},
	}
	pricing := v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}
	p, err := New(Options{Pricing: pricing}).Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Summary.DrainableNodes != 1 || p.Summary.HourlySaving != 0.192 || p.Summary.Currency != "USD" {
		t.Errorf("summary %+v", p.Summary)
	}
	if n := node(p, "spot"); n.HourlyPrice != 0.07 {
		t.Errorf("spot node price %v", n.HourlyPrice)
	}
}

// Anti-affinity across namespaces reaches the pods it names, whichever way the
// term names their namespace; the shortcuts the fitter takes must not hide it.
func TestCrossNamespaceAntiAffinity(t *testing.T) {
	term := func(namespaces []string, nsSelector *metav1.LabelSelector) tu.PodOption {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					TopologyKey:       "kubernetes.io/hostname",
					Namespaces:        namespaces,
					NamespaceSelector: nsSelector,
				}},
			}}
		}
	}
	cases := []struct {
		name     string
		existing *corev1.Pod // on the only spot node
		moving   *corev1.Pod // on the on-demand node
	}{
		{"existing pod names the namespace",
			pod("guard", "spot", "100m", tu.InNamespace("ops"), term([]string{"default"}, nil)),
			pod("web", "od", "100m", tu.WithLabels("app", "web"))},
		{"existing pod selects every namespace",
			pod("guard", "spot", "100m", tu.InNamespace("ops"), term(nil, &metav1.LabelSelector{})),
			pod("web", "od", "100m", tu.WithLabels("app", "web"))},
		{"moving pod names the other namespace",
			pod("web", "spot", "100m", tu.InNamespace("ops"), tu.WithLabels("app", "web")),
			pod("guard", "od", "100m", term([]string{"ops"}, nil))},
		{"moving pod selects every namespace",
			pod("web", "spot", "100m", tu.InNamespace("ops"), tu.WithLabels("app", "web")),
			pod("guard", "od", "100m", term(nil, &metav1.LabelSelector{}))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot.Snapshot{
				Nodes:      []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
				Pods:       []*corev1.Pod{tc.existing, tc.moving},
				Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, {ObjectMeta: metav1.ObjectMeta{Name: "ops"}}},
			}
			p := plan(t, Rules{}, s)
			if od := node(p, "od"); od.Drainable || !strings.Contains(od.Reason, "InterPodAffinity") {
				t.Errorf("drainable=%v reason=%q, want an InterPodAffinity rejection", od.Drainable, od.Reason)
			}
		})
	}
}

func TestFitsOnSpot(t *testing.T) {
	a := pod("a", "od", "2")
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{a, pod("b", "spot", "1")},
	}
	dest, reason, err := New(Options{}).FitsOnSpot(context.Background(), s, a)
	if err != nil || dest != "spot" || reason != "" {
		t.Errorf("room on spot: %q %q %v", dest, reason, err)
	}
	s.Pods = append(s.Pods, pod("c", "spot", "2"))
	dest, reason, err = New(Options{}).FitsOnSpot(context.Background(), s, a)
	if err != nil || dest != "" || !strings.Contains(reason, "Insufficient cpu") {
		t.Errorf("spot full: %q %q %v", dest, reason, err)
	}
}

// A snapshot with the Revision of the last one gets the last plan; another
// revision, or none, is planned afresh.
func TestPlanRevisionReusesTheLastPlan(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pod("a", "od", "1")},
	}
	p := New(Options{})
	plans := map[string]*Plan{}
	for _, rev := range []string{"1", "1", "2", "", ""} {
		s.Revision = rev
		got, err := p.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := plans[rev]; ok && (rev == "") == (prev == got) {
			t.Errorf("revision %q: reused %v, want reuse only for a revision seen last", rev, prev == got)
		}
		plans[rev] = got
	}
	if plans["1"] == plans["2"] {
		t.Error("revision 2 got the plan of revision 1")
	}
	// Same revision, more pods: a copy that forgot to clear it is planned afresh.
	s.Revision = "2"
	s.Pods = append(s.Pods, pod("b", "od", "1"))
	if got, _ := p.Plan(context.Background(), s); got == plans["2"] || got.Summary.PodsToMove != 2 {
		t.Errorf("a snapshot with another pod got the last plan (%d pods to move)", got.Summary.PodsToMove)
	}
}
