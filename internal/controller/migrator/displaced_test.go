package migrator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// A consolidation whose node's own pods all go to another on-demand node,
// after it displaced a pod of that node to a spot node the group must add:
// the plan needs one new node, for the displaced pod. Counting only the
// node's own pods' destinations said none, and the migrator drained without
// asking for it: the displaced pod was evicted, the next re-check found no
// room on spot, the drain was rolled back, and the next run did the same.
func TestDisplacedPodsNeedNewNodes(t *testing.T) {
	const instanceType = "m5.xlarge"
	priced := func(name string) *corev1.Node {
		return tu.Node(name, tu.OnDemand(), tu.NodeLabel(plan.InstanceTypeLabel, instanceType))
	}
	pod := func(name, node, cpu string, opts ...tu.PodOption) *corev1.Pod {
		base := []tu.PodOption{tu.WithUID(), tu.OnNode(node), tu.OwnedBy("ReplicaSet", "rs-"+name), tu.CPU(cpu), tu.Phase(corev1.PodRunning)}
		return tu.Pod(name, append(base, opts...)...)
	}
	onDemandOnly := tu.RequireNodeLabel("karpenter.sh/capacity-type", "on-demand")
	snap := &snapshot.Snapshot{
		Nodes: []*corev1.Node{priced("od-1"), priced("od-2")},
		Pods: []*corev1.Pod{
			// od-1 stays: 3.7 of its 4 CPU taken, 1 of them by a pod
			// that may run on spot.
			pod("db-1", "od-1", "1500m", onDemandOnly), pod("web-1a", "od-1", "1"), pod("web-1b", "od-1", "1200m"),
			// od-2 holds a pinned pod only: it can go once web-1a has
			// made room for it on od-1.
			pod("db-2", "od-2", "600m", onDemandOnly),
		},
	}
	planner := plan.New(plan.Options{
		Pricing:       v1alpha1.PricingConfig{InstanceTypes: map[string]v1alpha1.InstancePrice{instanceType: {OnDemand: 0.192, Spot: 0.07}}},
		Consolidation: plan.Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01},
	})
	spot := fake.NewNodeGroup("spot", true, 0, 3)
	c := New(nil, nil, fake.New("fake"), planner, nil, nil, testingclock.NewFakeClock(time.Now()), nil, Options{})
	np, need, err := c.planOnGroup(context.Background(), snap, snap.Nodes[1], spot)
	if err != nil {
		t.Fatal(err)
	}
	if !np.Drainable || !np.Consolidated || len(np.Displaced) != 1 || np.Displaced[0].Name != "web-1a" {
		t.Fatalf("od-2's plan: a consolidation that displaces web-1a; got %+v", np)
	}
	for _, pp := range np.Pods {
		if pp.Destination != "od-1" {
			t.Fatalf("%s goes to %s, want od-1", pp.Name, pp.Destination)
		}
	}
	if need != 1 {
		t.Errorf("the plan needs %d new node(s), want 1: web-1a goes to %s", need, np.Displaced[0].Destination)
	}
}
