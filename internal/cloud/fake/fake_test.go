package fake_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/testutil"
)

func TestNodeGroupLifecycle(t *testing.T) {
	ctx := context.Background()
	g := fake.NewNodeGroup("spot-a", true, 1, 4)
	g.SetPrice(0.07)

	mustTarget := func(want int) {
		t.Helper()
		if got, err := g.TargetSize(ctx); err != nil || got != want {
			t.Fatalf("TargetSize = %d, %v; want %d", got, err, want)
		}
	}
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	mustTarget(3)
	if err := g.IncreaseSize(ctx, 2); !errors.Is(err, cloud.ErrAboveMaxSize) {
		t.Errorf("IncreaseSize above max: %v", err)
	}
	nodes := g.Fulfill(2)
	if len(nodes) != 2 || nodes[0].Name != "spot-a-1" || nodes[1].Spec.ProviderID != "fake://spot-a/spot-a-2" {
		t.Fatalf("Fulfill = %v", nodes)
	}
	if nodes[0].Labels["karpenter.sh/capacity-type"] != "spot" {
		t.Errorf("fulfilled node labels %v", nodes[0].Labels)
	}
	insts, err := g.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := []cloud.InstanceState{}
	for _, i := range insts {
		states = append(states, i.State)
	}
	if !slices.Equal(states, []cloud.InstanceState{cloud.InstanceRunning, cloud.InstanceRunning, cloud.InstanceCreating}) {
		t.Errorf("Nodes states %v", states)
	}
	if !insts[0].PriceKnown || insts[0].PricePerHour != 0.07 || !insts[0].Spot || insts[0].NodeGroup != "spot-a" {
		t.Errorf("instance %+v", insts[0])
	}

	// Cancelling never touches running instances.
	if err := g.DecreaseTargetSize(ctx, 2); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancel 2 with 1 unfulfilled: %v", err)
	}
	if err := g.DecreaseTargetSize(ctx, -1); !errors.Is(err, cloud.ErrInvalidDelta) {
		t.Errorf("cancel -1: %v", err)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	mustTarget(2)

	// DeleteNodes lowers the target and respects MinSize.
	if err := g.DeleteNodes(ctx, nodes); !errors.Is(err, cloud.ErrBelowMinSize) {
		t.Errorf("deleting both with min 1: %v", err)
	}
	if err := g.DeleteNodes(ctx, []*corev1.Node{testutil.Node("stranger")}); !errors.Is(err, cloud.ErrNotInNodeGroup) {
		t.Errorf("deleting a stranger: %v", err)
	}
	if err := g.DeleteNodes(ctx, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	mustTarget(1)
	if got := g.Deleted(); !slices.Equal(got, []string{"spot-a-1"}) {
		t.Errorf("Deleted = %v", got)
	}
}

func TestNodeGroupCapacityUnavailable(t *testing.T) {
	ctx := context.Background()
	g := fake.NewNodeGroup("spot-a", true, 0, 4)
	g.SetCapacityUnavailable(true)
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := g.Fulfill(1); got != nil {
		t.Errorf("Fulfill without capacity = %v", got)
	}
	insts, _ := g.Nodes(ctx)
	if len(insts) != 1 || insts[0].State != cloud.InstanceCreating || !cloud.IsCapacityUnavailable(insts[0].Err) {
		t.Fatalf("Nodes = %+v, want one creating instance with a capacity error", insts)
	}
	g.SetCapacityUnavailable(false)
	if got := g.Fulfill(1); len(got) != 1 {
		t.Errorf("Fulfill with capacity = %v", got)
	}
}

func TestNextErrorAndCalls(t *testing.T) {
	ctx := context.Background()
	p := fake.New("")
	g := fake.NewNodeGroup("g", true, 0, 2)
	p.AddNodeGroup(g)
	boom := errors.New("boom")

	p.SetNextError(fake.Instances, boom)
	if _, err := p.Instances(ctx, nil); !errors.Is(err, boom) {
		t.Errorf("first call: %v", err)
	}
	if _, err := p.Instances(ctx, nil); err != nil {
		t.Errorf("second call: %v, the error is one-shot", err)
	}
	if got := p.Calls(fake.Instances); got != 2 {
		t.Errorf("Calls = %d", got)
	}
	g.SetNextError(fake.IncreaseSize, cloud.NewCapacityUnavailableError("g", boom))
	if err := g.IncreaseSize(ctx, 1); !cloud.IsCapacityUnavailable(err) {
		t.Errorf("IncreaseSize: %v", err)
	}
	if n, _ := g.TargetSize(ctx); n != 0 {
		t.Errorf("a failed IncreaseSize changed the target to %d", n)
	}

	p.Reset()
	if p.Calls(fake.Instances) != 0 {
		t.Error("Reset kept the counters")
	}
	if groups, _ := p.NodeGroups(ctx); len(groups) != 0 {
		t.Errorf("Reset kept %d groups", len(groups))
	}
	g.Reset()
	if g.Calls(fake.IncreaseSize) != 0 || g.Unfulfilled() != 0 {
		t.Error("NodeGroup.Reset kept state")
	}
}

func TestProviderInstancesAndDelete(t *testing.T) {
	ctx := context.Background()
	p := fake.New("test")
	g := fake.NewNodeGroup("spot-a", true, 0, 2)
	p.AddNodeGroup(g)
	_ = g.IncreaseSize(ctx, 1)
	spotNode := g.Fulfill(1)[0]
	p.SetInstance("od-1", cloud.Instance{ID: "i-od", InstanceType: "m5.xlarge"})
	od := testutil.Node("od-1", testutil.OnDemand())
	unknown := testutil.Node("unknown")
	cp := testutil.Node("cp", testutil.NodeLabel("node-role.kubernetes.io/control-plane", ""))
	p.SetInstance("cp", cloud.Instance{ID: "i-cp"})

	got, err := p.Instances(ctx, []*corev1.Node{spotNode, od, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[spotNode.Name].Spot || got["od-1"].ID != "i-od" || got["od-1"].State != cloud.InstanceRunning {
		t.Errorf("Instances = %+v", got)
	}
	if grp, err := p.NodeGroupForNode(ctx, spotNode); err != nil || grp.ID() != "spot-a" {
		t.Errorf("NodeGroupForNode = %v, %v", grp, err)
	}
	if _, err := p.NodeGroupForNode(ctx, od); !cloud.IsNotFound(err) {
		t.Errorf("NodeGroupForNode of a lone node: %v", err)
	}

	if err := p.DeleteInstance(ctx, cp); !cloud.IsControlPlane(err) {
		t.Errorf("deleting the control plane: %v", err)
	}
	for _, n := range []*corev1.Node{od, spotNode} {
		if err := p.DeleteInstance(ctx, n); err != nil {
			t.Errorf("deleting %s: %v", n.Name, err)
		}
	}
	if err := p.DeleteInstance(ctx, od); !cloud.IsNotFound(err) {
		t.Errorf("deleting twice: %v", err)
	}
	if got := p.DeletedInstances(); !slices.Equal(got, []string{"od-1", spotNode.Name}) {
		t.Errorf("DeletedInstances = %v", got)
	}
	if n, _ := g.TargetSize(ctx); n != 0 {
		t.Errorf("target after deleting the group's node = %d", n)
	}
}
