package plan

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

func pending(name, cpu string, opts ...tu.PodOption) *corev1.Pod {
	base := []tu.PodOption{tu.WithUID(), tu.OwnedBy("ReplicaSet", "rs-"+name), tu.CPU(cpu)}
	return tu.Pod(name, append(base, opts...)...)
}

func TestEngineSchedule(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, &snapshot.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*corev1.Node{
		tu.Node("a", tu.Capacity("2", "8Gi")),
		tu.Node("b", tu.Capacity("4", "8Gi"), tu.Taint("dedicated", "x", corev1.TaintEffectNoSchedule)),
		tu.Node("c", tu.Capacity("4", "8Gi")),
	}
	bound := []*corev1.Pod{pod("running", "c", "3")}
	cases := []struct {
		name    string
		pending []*corev1.Pod
		pick    func(*corev1.Pod, []fwk.NodeInfo) int
		want    []string
		reason  string
	}{
		{"first fit", []*corev1.Pod{pending("p", "1")}, nil, []string{"a"}, ""},
		{"commits placements", []*corev1.Pod{pending("p", "1500m"), pending("q", "1")}, nil, []string{"a", "c"}, ""},
		{"pick the last", []*corev1.Pod{pending("p", "500m")}, func(_ *corev1.Pod, f []fwk.NodeInfo) int { return len(f) - 1 }, []string{"c"}, ""},
		{"taint respected", []*corev1.Pod{pending("p", "3")}, nil, []string{""}, "0/3 nodes fit: 2 NodeResourcesFit: Insufficient cpu, 1 TaintToleration"},
		{"selector", []*corev1.Pod{pending("p", "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "c"} })}, nil, []string{"c"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Schedule(ctx, ScheduleRequest{Nodes: nodes, Pods: bound, Pending: tc.pending, Pick: tc.pick})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range got {
				if p.Node != tc.want[i] {
					t.Errorf("pod %s on %q, want %q (%s)", p.Pod.Name, p.Node, tc.want[i], p.Reason)
				}
				if tc.reason != "" && !strings.Contains(p.Reason, tc.reason) {
					t.Errorf("reason %q, want it to contain %q", p.Reason, tc.reason)
				}
			}
		})
	}
	// Eligible restricts destinations; the bound pods' requests still count.
	got, err := e.Schedule(ctx, ScheduleRequest{Nodes: nodes, Pods: bound, Pending: []*corev1.Pod{pending("p", "2")},
		Eligible: func(n *corev1.Node) bool { return n.Name == "c" }})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Node != "" || !strings.Contains(got[0].Reason, "0/1 nodes fit: 1 NodeResourcesFit: Insufficient cpu") {
		t.Errorf("eligible: got %+v", got[0])
	}
}

// The engine and the planner agree on what fits: the same plugins.
func TestEngineAgreesWithFitsOnSpot(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, &snapshot.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("s1", tu.Spot(), tu.Zone("z1")), tu.Node("s2", tu.Spot(), tu.Zone("z2"))},
	}
	for i := range 6 {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("p%d", i), []string{"s1", "s2"}[i%2], "600m", tu.WithLabels("app", "web")))
	}
	for _, cpu := range []string{"100m", "1", "2", "3"} {
		candidate := pod("c"+cpu, "od", cpu, tu.WithLabels("app", "web"))
		s2 := *s
		s2.Pods = append(append([]*corev1.Pod{}, s.Pods...), candidate)
		dest, _, err := New(Options{}).FitsOnSpot(ctx, &s2, candidate)
		if err != nil {
			t.Fatal(err)
		}
		c := *candidate
		c.Spec.NodeName = ""
		got, err := e.Schedule(ctx, ScheduleRequest{Nodes: s.Nodes, Pods: s.Pods, Pending: []*corev1.Pod{&c},
			Eligible: func(n *corev1.Node) bool { return n.Name != "od" }})
		if err != nil {
			t.Fatal(err)
		}
		if (dest == "") != (got[0].Node == "") {
			t.Errorf("cpu %s: planner says %q, engine says %q (%s)", cpu, dest, got[0].Node, got[0].Reason)
		}
	}
}

func BenchmarkEngineSchedule(b *testing.B) {
	ctx := context.Background()
	e, err := NewEngine(ctx, &snapshot.Snapshot{})
	if err != nil {
		b.Fatal(err)
	}
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 40 {
		nodes = append(nodes, tu.Node(fmt.Sprintf("n%d", i), tu.Zone(fmt.Sprintf("z%d", i%3))))
	}
	for i := range 250 {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i%40), "200m", tu.Memory("500Mi"), tu.WithLabels("app", fmt.Sprintf("a%d", i%40))))
	}
	var queue []*corev1.Pod
	for i := range 10 {
		queue = append(queue, pending(fmt.Sprintf("q%d", i), "300m", tu.Memory("1Gi")))
	}
	for b.Loop() {
		if _, err := e.Schedule(ctx, ScheduleRequest{Nodes: nodes, Pods: pods, Pending: queue}); err != nil {
			b.Fatal(err)
		}
	}
}

// An Engine asked question after question about a changing cluster (it
// keeps its scheduler snapshot and applies what changed) answers each as a
// new Engine does. Random clusters change step by step (see changer); after
// each step both place the cluster's Pending pods and new replicas of a few
// bound ones, first fit or onto the last feasible node: the same node or the
// same reason for every pod.
func TestEngineKeptAnswersAsNew(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	ctx := context.Background()
	var questions, placed, kept, nodeCalls int
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 13))
		s := randomCluster(uint64(seed), 1+seed%3)
		withoutPortConflicts(s)
		honourTaints(s)
		e, err := NewEngine(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ch := newChanger(s, fmt.Sprintf("seed%d", seed))
		last := func(_ *corev1.Pod, f []fwk.NodeInfo) int { return len(f) - 1 }
		added := 0
		for step := range 30 {
			if step > 0 {
				changeCluster(s, ch, r, 3, &added)
			}
			var bound, queue []*corev1.Pod
			names := map[string]bool{}
			for _, n := range s.Nodes {
				names[n.Name] = true
			}
			for _, p := range s.Pods {
				switch {
				case names[p.Spec.NodeName]:
					bound = append(bound, p)
				case p.Spec.NodeName == "" && !terminal(p):
					queue = append(queue, p)
				}
			}
			for range min(3, len(bound)) {
				c := ch.renew(bound[r.IntN(len(bound))])
				c.Spec.NodeName = ""
				queue = append(queue, c)
			}
			req := ScheduleRequest{Nodes: s.Nodes, Pods: bound, Pending: queue}
			if step%2 == 1 {
				req.Pick = last
			}
			before := e.kept
			nodesChanged := before != nil && !sameNamesAndLabels(before.nodes, s.Nodes)
			got, err := e.Schedule(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if before != nil && e.kept == before {
				kept++
				if nodesChanged {
					nodeCalls++
				}
			}
			fresh, err := NewEngine(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Schedule(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i].Node != want[i].Node || got[i].Reason != want[i].Reason {
					t.Fatalf("seed %d step %d: %s/%s placed on %q (%s) by the kept engine, on %q (%s) by a new one",
						seed, step, want[i].Pod.Namespace, want[i].Pod.Name, got[i].Node, got[i].Reason, want[i].Node, want[i].Reason)
				}
				questions++
				if want[i].Node != "" {
					placed++
				}
			}
		}
	}
	// Most calls must be answered from a kept snapshot, nodes must come and
	// go, and pods must be placed and refused, or the test shows little.
	if kept < seeds*20 || nodeCalls < seeds*5 || placed < questions/5 || placed > questions*9/10 {
		t.Errorf("%d questions (%d placed), %d calls on a kept snapshot (%d after nodes changed): the test shows too little", questions, placed, kept, nodeCalls)
	}
	t.Logf("%d questions (%d placed), %d of %d calls on a kept snapshot, %d of them after nodes were added, removed or relabelled", questions, placed, kept, seeds*30, nodeCalls)
}

// honourTaints makes every other spread constraint of s count only the nodes
// whose taints the pod tolerates (nodeTaintsPolicy: Honor), so that a node
// tainted between two questions changes the counts.
func honourTaints(s *snapshot.Snapshot) {
	honour := corev1.NodeInclusionPolicyHonor
	k := 0
	for _, p := range s.Pods {
		for i := range p.Spec.TopologySpreadConstraints {
			if k++; k%2 == 0 {
				p.Spec.TopologySpreadConstraints[i].NodeTaintsPolicy = &honour
			}
		}
	}
}

// sameNamesAndLabels reports whether two node lists name the same nodes, in
// order, with the same labels.
func sameNamesAndLabels(a, b []*corev1.Node) bool {
	return slices.EqualFunc(a, b, func(x, y *corev1.Node) bool { return x.Name == y.Name && maps.Equal(x.Labels, y.Labels) })
}

// changeCluster makes one to most changes to pods (see changer), and now and
// then one to nodes (see nodeChange).
func changeCluster(s *snapshot.Snapshot, ch *changer, r *rand.Rand, most int, added *int) {
	for range 1 + r.IntN(most) {
		ch.change(r)
	}
	if r.IntN(3) == 0 {
		nodeChange(s, r, added)
	}
}

// nodeChange removes a node (its pods stay bound to it, as pods of a deleted
// node are until the garbage collector comes), adds a copy of one under a new
// name, relabels one, or taints one or takes its taints off; the snapshot's
// slices are replaced, not modified.
func nodeChange(s *snapshot.Snapshot, r *rand.Rand, added *int) {
	i := r.IntN(len(s.Nodes))
	switch op := r.IntN(4); {
	case op == 0 && len(s.Nodes) > 2:
		s.Nodes = slices.Delete(slices.Clone(s.Nodes), i, i+1)
	case op <= 1:
		n := s.Nodes[i].DeepCopy()
		*added++
		n.Name = fmt.Sprintf("added-%d", *added)
		n.Labels[corev1.LabelHostname] = n.Name
		s.Nodes = append(slices.Clone(s.Nodes), n)
	case op == 2:
		n := s.Nodes[i].DeepCopy()
		n.Labels["relabelled"] = fmt.Sprint(r.IntN(2))
		s.Nodes = slices.Clone(s.Nodes)
		s.Nodes[i] = n
	default: // tainted, or its taints taken off, as a drain marks a node
		n := s.Nodes[i].DeepCopy()
		if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
		} else {
			n.Spec.Taints = []corev1.Taint{{Key: "spotter.dev/draining", Effect: corev1.TaintEffectNoSchedule}}
		}
		s.Nodes = slices.Clone(s.Nodes)
		s.Nodes[i] = n
	}
}

// A planner that plans again, taking the last plan's templates, PodInfos and
// destination NodeInfos, plans as a new planner would, while pods and nodes
// change between plans.
func TestPlannerAgainPlansAsNew(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	ctx := context.Background()
	var plans, drained, copied int
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 17))
		s := randomCluster(uint64(seed), 1+seed%3)
		withoutPortConflicts(s)
		var opts Options
		if seed%2 == 1 {
			for _, n := range s.Nodes {
				n.Labels[InstanceTypeLabel] = "m5.xlarge"
			}
			opts = Options{Pricing: consolidationPrices, Consolidation: Consolidation{Enabled: true}}
		}
		again := New(opts)
		ch := newChanger(s, fmt.Sprintf("seed%d", seed))
		added := 0
		for step := range 12 {
			if step > 0 {
				changeCluster(s, ch, r, 4, &added)
			}
			// Pods bound to a node that is gone are left out, as the
			// snapshot leaves them.
			view := *s
			view.Pods = slices.DeleteFunc(slices.Clone(s.Pods), func(p *corev1.Pod) bool {
				return p.Spec.NodeName != "" && !slices.ContainsFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == p.Spec.NodeName })
			})
			before := again.built
			got, err := again.Plan(ctx, &view)
			if err != nil {
				t.Fatal(err)
			}
			for name, b := range again.built {
				if before[name] == b {
					copied++
				}
			}
			want, err := New(opts).Plan(ctx, &view)
			if err != nil {
				t.Fatal(err)
			}
			if diffs := comparePlans(got, want); len(diffs) > 0 {
				t.Fatalf("seed %d step %d: the planner planning again and a new one disagree:\n  %s", seed, step, strings.Join(diffs, "\n  "))
			}
			plans++
			drained += got.Summary.DrainableNodes
		}
	}
	if drained < plans/2 || copied < plans*3 {
		t.Errorf("%d plans, %d drainable nodes, %d destination NodeInfos copied: the test shows too little", plans, drained, copied)
	}
	t.Logf("%d plans, %d drainable nodes, %d destination NodeInfos copied from the last plan", plans, drained, copied)
}

// Two nodes of one name in a question (a list read across a node's
// replacement): the snapshot holds the later, and the next question, naming
// it once, is answered as a new engine would.
func TestEngineNodesOfOneName(t *testing.T) {
	ctx := context.Background()
	old := tu.Node("n1", tu.Spot(), tu.Zone("a"), tu.Capacity("1", "4Gi"))
	renamed := tu.Node("n1", tu.Spot(), tu.Zone("b"), tu.Capacity("8", "16Gi"))
	pending := func() []*corev1.Pod {
		return []*corev1.Pod{tu.Pod("p", tu.WithUID(), tu.CPU("2"))}
	}
	e, err := NewEngine(ctx, &snapshot.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	for i, nodes := range [][]*corev1.Node{{renamed, old}, {renamed}, {old, renamed}, {renamed}} {
		got, err := e.Schedule(ctx, ScheduleRequest{Nodes: nodes, Pending: pending()})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := NewEngine(ctx, &snapshot.Snapshot{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Schedule(ctx, ScheduleRequest{Nodes: nodes, Pending: pending()})
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Node != want[0].Node {
			t.Errorf("question %d: placed on %q by the kept engine, on %q by a new one", i, got[0].Node, want[0].Node)
		}
	}
}
