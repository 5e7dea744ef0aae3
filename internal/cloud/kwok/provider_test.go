package kwok_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/kwok"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testutil"
)

// The provider runs under a controller-runtime manager, on the leader only.
var (
	_ manager.Runnable               = (*kwok.Provider)(nil)
	_ manager.LeaderElectionRunnable = (*kwok.Provider)(nil)
)

var epoch = time.Date(2023, 8, 27, 0, 0, 0, 0, time.UTC)

const availabilityTrace = "testdata/traces/availability/16-node/aws-08-27-2023/us-west-2a_v100_1.json"

// setup builds a provider on a fake clientset and a fake clock.
func setup(t *testing.T, groups ...kwok.NodeGroupConfig) (*kwok.Provider, kubernetes.Interface, *clocktesting.FakeClock) {
	t.Helper()
	client := k8sfake.NewClientset()
	clk := clocktesting.NewFakeClock(epoch)
	p, err := kwok.New(client, clk, kwok.Config{NodeGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
	return p, client, clk
}

func reconcile(t *testing.T, p *kwok.Provider) {
	t.Helper()
	if err := p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// groupNodes lists the Nodes of group id in the API, by name.
func groupNodes(t *testing.T, client kubernetes.Interface, id string) []corev1.Node {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

func target(t *testing.T, g cloud.NodeGroup) int {
	t.Helper()
	n, err := g.TargetSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIncreaseSizeCreatesNodesAfterTheDelay(t *testing.T) {
	ctx := context.Background()
	p, client, clk := setup(t, kwok.NodeGroupConfig{
		ID: "spot-a", Spot: true, MaxSize: 5, InstanceType: "m5.xlarge", Zone: "zone-b", CPU: "4", Memory: "16Gi",
		Labels:            map[string]string{"team": "batch"},
		Taints:            []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
		PricePerHour:      ptr.To(0.07),
		ProvisioningDelay: metav1.Duration{Duration: 30 * time.Second},
	})
	g := p.NodeGroup("spot-a")
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := target(t, g); got != 2 {
		t.Errorf("target = %d", got)
	}
	reconcile(t, p)
	clk.Step(29 * time.Second)
	reconcile(t, p)
	if n := groupNodes(t, client, "spot-a"); len(n) != 0 {
		t.Fatalf("%d nodes before the delay", len(n))
	}
	insts, _ := g.Nodes(ctx)
	if len(insts) != 2 || insts[0].State != cloud.InstanceCreating || insts[0].Err != nil {
		t.Errorf("before the delay Nodes = %+v", insts)
	}

	clk.Step(time.Second)
	reconcile(t, p)
	nodes := groupNodes(t, client, "spot-a")
	if len(nodes) != 2 {
		t.Fatalf("%d nodes after the delay, want 2", len(nodes))
	}
	n := nodes[0]
	for k, want := range map[string]string{
		kwok.NodeGroupLabel:   "spot-a",
		lab.CapacityTypeLabel: "spot",
		lab.InstanceTypeLabel: "m5.xlarge",
		lab.ZoneLabel:         "zone-b",
		"team":                "batch",
		corev1.LabelHostname:  n.Name,
	} {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if n.Annotations[lab.KwokNodeAnnotation] != "fake" {
		t.Errorf("not a kwok node: %v", n.Annotations)
	}
	if n.Spec.ProviderID != "kwok://spot-a/"+n.Name {
		t.Errorf("providerID %q", n.Spec.ProviderID)
	}
	if group, name, ok := kwok.ParseProviderID(n.Spec.ProviderID); !ok || group != "spot-a" || name != n.Name {
		t.Errorf("ParseProviderID = %q, %q, %v", group, name, ok)
	}
	if len(n.Spec.Taints) != 1 || n.Status.Capacity.Cpu().String() != "4" {
		t.Errorf("taints %v, capacity %v", n.Spec.Taints, n.Status.Capacity)
	}

	insts, _ = g.Nodes(ctx)
	if len(insts) != 2 || insts[0].State != cloud.InstanceRunning || insts[0].NodeName == "" || !insts[0].Spot ||
		insts[0].PricePerHour != 0.07 || insts[0].InstanceType != "m5.xlarge" || insts[0].Zone != "zone-b" {
		t.Errorf("after the delay Nodes = %+v", insts)
	}
	byName, _ := p.Instances(ctx, []*corev1.Node{&nodes[0], testutil.Node("stranger")})
	if len(byName) != 1 || byName[n.Name].ID != n.Spec.ProviderID || byName[n.Name].NodeGroup != "spot-a" {
		t.Errorf("Instances = %+v", byName)
	}
}

func TestSizeLimits(t *testing.T) {
	ctx := context.Background()
	p, client, _ := setup(t, kwok.NodeGroupConfig{ID: "od", MinSize: 1, MaxSize: 3, InitialSize: 2})
	g := p.NodeGroup("od")
	reconcile(t, p) // the initial size has no delay
	nodes := groupNodes(t, client, "od")
	if len(nodes) != 2 || nodes[0].Labels[lab.CapacityTypeLabel] != "on-demand" {
		t.Fatalf("initial nodes %v", nodes)
	}
	for _, tc := range []struct {
		name string
		op   func() error
		want error
	}{
		{"increase above max", func() error { return g.IncreaseSize(ctx, 2) }, cloud.ErrAboveMaxSize},
		{"increase by 0", func() error { return g.IncreaseSize(ctx, 0) }, cloud.ErrInvalidDelta},
		{"decrease by -1", func() error { return g.DecreaseTargetSize(ctx, -1) }, cloud.ErrInvalidDelta},
		{"cancel with nothing unfulfilled", func() error { return g.DecreaseTargetSize(ctx, 1) }, cloud.ErrNotUnfulfilled},
		{"delete below min", func() error { return g.DeleteNodes(ctx, []*corev1.Node{&nodes[0], &nodes[1]}) }, cloud.ErrBelowMinSize},
		{"delete a stranger", func() error { return g.DeleteNodes(ctx, []*corev1.Node{testutil.Node("x")}) }, cloud.ErrNotInNodeGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
			if got := target(t, g); got != 2 {
				t.Errorf("a refused change moved the target to %d", got)
			}
		})
	}
	if n := groupNodes(t, client, "od"); len(n) != 2 {
		t.Errorf("refused changes deleted nodes: %d left", len(n))
	}

	// Cancelling never goes below MinSize either.
	if err := g.DeleteNodes(ctx, []*corev1.Node{&nodes[0]}); err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.DeleteNodes(ctx, []*corev1.Node{&nodes[1]}); err != nil {
		t.Fatal(err)
	}
	if err := g.DecreaseTargetSize(ctx, 1); !errors.Is(err, cloud.ErrBelowMinSize) {
		t.Errorf("cancelling below min: %v", err)
	}
}

func TestCapacityLimitLeavesRequestsUnfulfilled(t *testing.T) {
	ctx := context.Background()
	p, client, clk := setup(t, kwok.NodeGroupConfig{
		ID: "spot-a", Spot: true, MaxSize: 5, CapacityLimit: ptr.To(1),
		ProvisioningDelay: metav1.Duration{Duration: 10 * time.Second},
	})
	g := p.NodeGroup("spot-a")
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	reconcile(t, p)
	if n := groupNodes(t, client, "spot-a"); len(n) != 1 {
		t.Fatalf("%d nodes with a capacity of 1", len(n))
	}
	if req, unavailable := g.Unfulfilled(); req != 2 || unavailable != 2 {
		t.Errorf("Unfulfilled = %d, %d; want 2, 2", req, unavailable)
	}
	insts, _ := g.Nodes(ctx)
	var errs []error
	for _, i := range insts {
		if i.State == cloud.InstanceCreating {
			errs = append(errs, i.Err)
		}
	}
	if len(errs) != 2 || !cloud.IsCapacityUnavailable(errs[0]) || !cloud.IsCapacityUnavailable(errs[1]) {
		t.Errorf("unfulfilled instances report %v", errs)
	}

	// The caller gives up: cancelling leaves the running node alone.
	if err := g.DecreaseTargetSize(ctx, 3); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancelling 3 with 2 unfulfilled: %v", err)
	}
	if err := g.DecreaseTargetSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := target(t, g); got != 1 {
		t.Errorf("target after cancelling = %d", got)
	}
	clk.Step(time.Hour)
	reconcile(t, p)
	if n := groupNodes(t, client, "spot-a"); len(n) != 1 {
		t.Errorf("%d nodes after cancelling", len(n))
	}
}

func TestDeleteNodesAndDeleteInstance(t *testing.T) {
	ctx := context.Background()
	p, client, _ := setup(t,
		kwok.NodeGroupConfig{ID: "od", MaxSize: 3, InitialSize: 3},
		kwok.NodeGroupConfig{ID: "cp", MaxSize: 1, InitialSize: 1, Labels: map[string]string{lab.ControlPlaneRole: ""}},
	)
	reconcile(t, p)
	nodes := groupNodes(t, client, "od")
	g := p.NodeGroup("od")

	if err := g.DeleteNodes(ctx, []*corev1.Node{&nodes[0], &nodes[1]}); err != nil {
		t.Fatal(err)
	}
	if got := target(t, g); got != 1 {
		t.Errorf("target = %d after deleting 2 of 3", got)
	}
	if left := groupNodes(t, client, "od"); len(left) != 1 || left[0].Name != nodes[2].Name {
		t.Errorf("left %v", left)
	}
	if err := g.DeleteNodes(ctx, []*corev1.Node{&nodes[0]}); !cloud.IsNotFound(err) {
		t.Errorf("deleting again: %v", err)
	}

	if err := p.DeleteInstance(ctx, &nodes[2]); err != nil {
		t.Fatal(err)
	}
	if got := target(t, g); got != 0 {
		t.Errorf("target = %d after DeleteInstance", got)
	}
	if err := p.DeleteInstance(ctx, testutil.Node("lone")); !cloud.IsNotFound(err) {
		t.Errorf("DeleteInstance of a node in no group: %v", err)
	}
	if _, err := p.NodeGroupForNode(ctx, testutil.Node("lone")); !cloud.IsNotFound(err) {
		t.Errorf("NodeGroupForNode of a node in no group: %v", err)
	}

	// An on-demand control-plane group is allowed, but its nodes are never deleted.
	cp := groupNodes(t, client, "cp")
	if err := p.DeleteInstance(ctx, &cp[0]); !cloud.IsControlPlane(err) {
		t.Errorf("deleting a control-plane node: %v", err)
	}
	if left := groupNodes(t, client, "cp"); len(left) != 1 {
		t.Error("the control-plane node was deleted")
	}
	reconcile(t, p)
	if left := groupNodes(t, client, "od"); len(left) != 0 {
		t.Errorf("deleted nodes came back: %v", left)
	}
}

func TestTemplateNodeOfEmptyGroup(t *testing.T) {
	p, _, _ := setup(t, kwok.NodeGroupConfig{
		ID: "spot-big", Spot: true, MaxSize: 10, CPU: "64", Memory: "256Gi", InstanceType: "r5.16xlarge",
		Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
	})
	g := p.NodeGroup("spot-big")
	if got := target(t, g); got != 0 {
		t.Fatalf("target = %d", got)
	}
	tmpl, err := g.TemplateNode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Status.Allocatable.Cpu().String() != "64" || tmpl.Status.Allocatable.Memory().String() != "256Gi" ||
		tmpl.Labels[lab.CapacityTypeLabel] != "spot" || tmpl.Labels[lab.InstanceTypeLabel] != "r5.16xlarge" ||
		tmpl.Labels[kwok.NodeGroupLabel] != "spot-big" || len(tmpl.Spec.Taints) != 1 || tmpl.Spec.ProviderID != "" {
		t.Errorf("template %+v", tmpl)
	}
	tmpl.Labels["changed"] = "yes"
	again, _ := g.TemplateNode(context.Background())
	if _, ok := again.Labels["changed"]; ok {
		t.Error("TemplateNode returned a shared object")
	}
}

// The availability trace us-west-2a starts (300 s ticks, out of 16):
// 0 x7, 5, 16 x7, 8, 8, 0 x7, 16 ...
func TestTraceReplayChangesCapacityOverTime(t *testing.T) {
	ctx := context.Background()
	p, client, clk := setup(t, kwok.NodeGroupConfig{
		ID: "spot-trace", Spot: true, MaxSize: 4,
		Trace: &kwok.TraceConfig{Path: availabilityTrace, Nodes: 16},
	})
	g := p.NodeGroup("spot-trace")
	if err := g.IncreaseSize(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at                           time.Duration
		capacity, nodes, unavailable int
	}{
		{0, 0, 0, 4},
		{6*5*time.Minute + 299*time.Second, 0, 0, 4},
		{7 * 5 * time.Minute, 1, 1, 3},  // 5 of 16 -> 1 of 4
		{8 * 5 * time.Minute, 4, 4, 0},  // 16 of 16
		{15 * 5 * time.Minute, 2, 4, 0}, // 8 of 16: no preemption, nodes stay
		{17 * 5 * time.Minute, 0, 4, 0},
	} {
		clk.SetTime(epoch.Add(tc.at))
		reconcile(t, p)
		if c, limited := g.Capacity(); c != tc.capacity || !limited {
			t.Errorf("at %s capacity = %d, %v; want %d", tc.at, c, limited, tc.capacity)
		}
		if n := groupNodes(t, client, "spot-trace"); len(n) != tc.nodes {
			t.Errorf("at %s %d nodes, want %d", tc.at, len(n), tc.nodes)
		}
		if _, unavailable := g.Unfulfilled(); unavailable != tc.unavailable {
			t.Errorf("at %s %d requests capacity-unavailable, want %d", tc.at, unavailable, tc.unavailable)
		}
	}
}

func TestTracePreemptionAndOffset(t *testing.T) {
	p, client, clk := setup(t, kwok.NodeGroupConfig{
		ID: "spot-pre", Spot: true, MaxSize: 4, InitialSize: 4, CapacityLimit: ptr.To(3), Preempt: true,
		// Start at tick 8 (16 of 16), so the limit of 3 is the lower one.
		Trace: &kwok.TraceConfig{Path: availabilityTrace, Offset: metav1.Duration{Duration: 8 * 5 * time.Minute}},
	})
	g := p.NodeGroup("spot-pre")
	for _, tc := range []struct {
		at                    time.Duration
		capacity, nodes       int
		requests, unavailable int
	}{
		{0, 3, 3, 1, 1},
		{7 * 5 * time.Minute, 2, 2, 2, 2},  // tick 15: 8 of 16 -> 2; one preempted
		{9 * 5 * time.Minute, 0, 0, 4, 4},  // tick 17: none
		{16 * 5 * time.Minute, 3, 3, 1, 1}, // tick 24: full, the limit holds
	} {
		clk.SetTime(epoch.Add(tc.at))
		reconcile(t, p)
		if c, _ := g.Capacity(); c != tc.capacity {
			t.Errorf("at +%s capacity = %d, want %d", tc.at, c, tc.capacity)
		}
		if n := groupNodes(t, client, "spot-pre"); len(n) != tc.nodes {
			t.Errorf("at +%s %d nodes, want %d", tc.at, len(n), tc.nodes)
		}
		if req, unavailable := g.Unfulfilled(); req != tc.requests || unavailable != tc.unavailable {
			t.Errorf("at +%s unfulfilled %d (%d capacity-unavailable), want %d (%d)", tc.at, req, unavailable, tc.requests, tc.unavailable)
		}
		if got := target(t, g); got != 4 {
			t.Errorf("at +%s target %d: preemption must keep the target", tc.at, got)
		}
	}
}

func TestControlPlaneOnSpotIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  kwok.NodeGroupConfig
	}{
		{"label", kwok.NodeGroupConfig{ID: "cp", Spot: true, MaxSize: 1, Labels: map[string]string{lab.ControlPlaneRole: ""}}},
		{"taint", kwok.NodeGroupConfig{ID: "cp", Spot: true, MaxSize: 1, Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kwok.New(k8sfake.NewClientset(), clocktesting.NewFakeClock(epoch), kwok.Config{NodeGroups: []kwok.NodeGroupConfig{
				{ID: "fine", Spot: true, MaxSize: 1}, tc.cfg,
			}})
			if !cloud.IsControlPlane(err) {
				t.Fatalf("New = %v, want a control-plane refusal", err)
			}
			if !strings.Contains(err.Error(), "nodeGroups[1]") {
				t.Errorf("error does not say which group: %v", err)
			}
		})
	}
}

func TestStartAdoptsAndReplacesDeletedNodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := k8sfake.NewClientset()
	clk := clocktesting.NewFakeClock(epoch)
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{{ID: "od", MaxSize: 5, InitialSize: 2}}}

	// A first run creates the initial nodes.
	first, err := kwok.New(client, clk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reconcile(t, first)
	before := groupNodes(t, client, "od")

	// A second run adopts them instead of creating more.
	p, err := kwok.New(client, clk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	select {
	case <-p.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not sync")
	}
	reconcile(t, p)
	g := p.NodeGroup("od")
	if n := groupNodes(t, client, "od"); len(n) != 2 || target(t, g) != 2 {
		t.Fatalf("after a restart %d nodes, target %d; want 2, 2", len(n), target(t, g))
	}

	// A node deleted behind the provider's back is replaced, the target kept.
	if err := client.CoreV1().Nodes().Delete(ctx, before[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.Reconcile(ctx); err != nil {
			return false, err
		}
		n := groupNodes(t, client, "od")
		return len(n) == 2 && n[0].Name != before[0].Name && n[1].Name != before[0].Name, nil
	})
	if err != nil {
		t.Fatalf("the deleted node was not replaced: %v", err)
	}
	if got := target(t, g); got != 2 {
		t.Errorf("target %d after a replacement", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}

func TestStartReconcilesOnItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := k8sfake.NewClientset()
	clk := clocktesting.NewFakeClock(epoch)
	p, err := kwok.New(client, clk, kwok.Config{
		Interval:   metav1.Duration{Duration: 10 * time.Second},
		NodeGroups: []kwok.NodeGroupConfig{{ID: "spot", Spot: true, MaxSize: 3, ProvisioningDelay: metav1.Duration{Duration: time.Minute}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Start(ctx) }()
	<-p.Synced()
	if err := p.NodeGroup("spot").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Step the fake clock each time the loop waits, until the node exists.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if clk.HasWaiters() {
			clk.Step(10 * time.Second)
		}
		return len(groupNodes(t, client, "spot")) == 1, nil
	})
	if err != nil {
		t.Fatalf("Start did not create the node: %v", err)
	}
	if elapsed := clk.Since(epoch); elapsed < time.Minute {
		t.Errorf("node created after %s, before the provisioning delay", elapsed)
	}
}
