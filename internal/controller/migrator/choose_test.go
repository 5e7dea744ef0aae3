package migrator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// The order on-demand nodes are replaced in: already selected, unschedulable,
// tainted by the cluster autoscaler, then oldest; never the control plane,
// spot nodes, Spotter's own node or a plan's template nodes. Each rank's
// nodes are younger than every node of the ranks after it, so that ranks
// merged (or a node put in the wrong one) order by age instead, and the
// order changes.
func TestNextCandidateOrder(t *testing.T) {
	created := func(minutes int) tu.NodeOption {
		return func(n *corev1.Node) {
			n.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, minutes, 0, 0, time.UTC))
		}
	}
	nodes := []*corev1.Node{
		tu.Node("old", tu.OnDemand(), created(0)),
		tu.Node("young", tu.OnDemand(), created(30)),
		tu.Node("ca-deleting", tu.OnDemand(), created(45), tu.Taint(ToBeDeletedTaint, "1", corev1.TaintEffectNoSchedule)),
		tu.Node("ca-tainted", tu.OnDemand(), created(40), tu.Taint(DeletionCandidateTaint, "1", corev1.TaintEffectPreferNoSchedule)),
		tu.Node("cordoned", tu.OnDemand(), created(50), tu.Cordoned()),
		tu.Node("selected", tu.OnDemand(), created(59), tu.NodeLabel(SelectedForDeletionLabel, "1")),
		tu.Node("own", tu.OnDemand(), created(-10)),
		tu.Node("spot", tu.Spot(), created(-20)),
		tu.Node("cp", tu.OnDemand(), tu.NodeLabel("node-role.kubernetes.io/control-plane", ""), created(-30)),
		tu.Node(templatePrefix+"spot-0", tu.OnDemand(), created(-40)),
	}
	c := New(nil, nil, fake.New("fake"), plan.New(plan.Options{}), nil, nil, testingclock.NewFakeClock(time.Now()), nil, Options{OwnNode: "own"})
	snap := &snapshot.Snapshot{Nodes: nodes}
	tried := map[string]bool{}
	var order []string
	for n := c.nextCandidate(snap, tried); n != nil; n = c.nextCandidate(snap, tried) {
		order = append(order, n.Name)
		tried[n.Name] = true
	}
	if got, want := strings.Join(order, ","), "selected,cordoned,ca-tainted,ca-deleting,old,young"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}

// Spot groups cheapest first, unknown prices last; on-demand groups and groups
// backed off after a shortage are left out.
func TestSpotGroups(t *testing.T) {
	p := fake.New("fake")
	for _, g := range []struct {
		id    string
		spot  bool
		price float64
	}{{"dear", true, 0.3}, {"cheap", true, 0.1}, {"unpriced", true, -1}, {"od", false, 0.05}, {"short", true, 0.01}} {
		ng := fake.NewNodeGroup(g.id, g.spot, 0, 10)
		if g.price >= 0 {
			ng.SetPrice(g.price)
		}
		p.AddNodeGroup(ng)
	}
	clk := testingclock.NewFakeClock(time.Now())
	c := New(nil, nil, p, plan.New(plan.Options{}), nil, nil, clk, nil, Options{})
	c.backoff["short"] = backoff.Cooldown{Failures: 1, Until: clk.Now().Add(time.Minute)}
	groups, err := c.spotGroups(context.Background(), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range groups {
		ids = append(ids, g.ID())
	}
	if got, want := strings.Join(ids, ","), "cheap,dear,unpriced"; got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
	clk.Step(2 * time.Minute)
	if groups, _ = c.spotGroups(context.Background(), clk.Now()); len(groups) != 4 || groups[0].ID() != "short" {
		t.Errorf("after its backoff the cheapest group is back first; got %d groups", len(groups))
	}
}

func TestNewOnDemand(t *testing.T) {
	got := newOnDemand(map[string]bool{"a": true, "c": true, "b": true}, map[string]bool{"a": true})
	if strings.Join(got, ",") != "b,c" {
		t.Errorf("new on-demand nodes %v, want b,c", got)
	}
}

// A node whose replacement failed is not a candidate while it rests: a
// minute after the first failure, twice as long after each further one.
func TestFailedNodeRests(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := New(nil, nil, fake.New("fake"), plan.New(plan.Options{}), nil, nil, clk, nil, Options{})
	snap := &snapshot.Snapshot{Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand())}}
	for failures, rest := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		f := c.failed["od-1"]
		f.Fail(clk.Now(), failedDrainBackoff, maxFailedDrainBackoff)
		c.failed["od-1"] = f
		clk.Step(rest - time.Second)
		if n := c.nextCandidate(snap, map[string]bool{}); n != nil {
			t.Fatalf("after %d failures: od-1 a candidate again within its rest of %s", failures+1, rest)
		}
		clk.Step(time.Second)
		if n := c.nextCandidate(snap, map[string]bool{}); n == nil {
			t.Fatalf("after %d failures: od-1 not a candidate once its rest of %s ended", failures+1, rest)
		}
	}
}
