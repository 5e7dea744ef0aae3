package migrator

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// spotNode is a spot node of a market, created at t0+created.
func spotNode(name, instanceType, zone string, created time.Duration, opts ...tu.NodeOption) *corev1.Node {
	n := tu.Node(name, append([]tu.NodeOption{tu.Spot(), tu.NodeLabel(plan.InstanceTypeLabel, instanceType),
		tu.NodeLabel(corev1.LabelTopologyZone, zone)}, opts...)...)
	n.CreationTimestamp = metav1.NewTime(t0.Add(created))
	return n
}

func interrupted() tu.NodeOption {
	return tu.Taint(interrupt.TaintKey, "termination", corev1.TaintEffectNoSchedule)
}

// The record counts each interrupted node once, from when it was first seen
// tainted (a rebalance recommendation's taint is no interruption), the
// node-hours its nodes ran within the window (a node gone ran until it was
// last seen), and forgets what left the window.
func TestRiskStats(t *testing.T) {
	r := NewRisk(24 * time.Hour)
	a := Market{"m5.xlarge", "zone-a"}
	r.Observe(spotNode("a1", "m5.xlarge", "zone-a", 0), t0.Add(time.Hour))
	r.Observe(spotNode("a2", "m5.xlarge", "zone-a", 0), t0.Add(time.Hour))
	r.Observe(spotNode("b1", "m5.xlarge", "zone-b", 0), t0.Add(time.Hour))
	r.Observe(spotNode("c1", "c5.xlarge", "zone-a", 0, tu.Taint(interrupt.TaintKey, "rebalance", corev1.TaintEffectPreferNoSchedule)), t0.Add(time.Hour))
	// a1 is interrupted at 2h (seen twice: counted once) and gone at 3h.
	r.Observe(spotNode("a1", "m5.xlarge", "zone-a", 0, interrupted()), t0.Add(2*time.Hour))
	r.Observe(spotNode("a1", "m5.xlarge", "zone-a", 0, interrupted()), t0.Add(150*time.Minute))
	r.Gone("a1", t0.Add(3*time.Hour))

	now := t0.Add(4 * time.Hour)
	st := r.Stats(a, now)
	if st.Interruptions != 1 || st.Nodes != 1 || math.Abs(st.NodeHours-7) > 1e-9 {
		t.Errorf("zone-a m5: %+v, want 1 interruption, 1 node alive, 7 node-hours (3 + 4)", st)
	}
	if got, want := st.Rate(), 1.0/(7+priorNodeHours); math.Abs(got-want) > 1e-12 {
		t.Errorf("rate %v, want %v", got, want)
	}
	if st := r.Stats(Market{InstanceType: "m5.xlarge"}, now); st.Interruptions != 1 || st.Nodes != 2 {
		t.Errorf("m5 in any zone: %+v, want 1 interruption and 2 nodes", st)
	}
	if st := r.Stats(Market{"c5.xlarge", "zone-a"}, now); st.Interruptions != 0 || st.Rate() != 0 {
		t.Errorf("a rebalance taint counted as an interruption: %+v", st)
	}
	if got := r.SpotNodes(); got != 3 {
		t.Errorf("%d spot nodes alive and not interrupted, want 3", got)
	}

	// A day later only the window counts: a1 is forgotten; the others ran
	// the whole day. b1, last seen at 20h, is not in the cache any more:
	// it ran until then.
	r.Observe(spotNode("b1", "m5.xlarge", "zone-b", 0), t0.Add(20*time.Hour))
	later := t0.Add(28 * time.Hour)
	r.Sync([]*corev1.Node{spotNode("a2", "m5.xlarge", "zone-a", 0), spotNode("c1", "c5.xlarge", "zone-a", 0)}, later)
	if st := r.Stats(a, later); st.Interruptions != 0 || math.Abs(st.NodeHours-24) > 1e-9 {
		t.Errorf("zone-a m5 a day later: %+v, want no interruption and 24 node-hours", st)
	}
	if st := r.Stats(Market{"m5.xlarge", "zone-b"}, later); st.Nodes != 0 || math.Abs(st.NodeHours-16) > 1e-9 {
		t.Errorf("zone-b m5 after b1 left the cache: %+v, want no node alive and 16 node-hours (4h to 20h, when last seen)", st)
	}
	if _, ok := r.nodes["a1"]; ok {
		t.Error("a node gone before the window is still recorded")
	}
}

// A spot node becoming Ready in a group's market ends the group's pause
// after a shortage; one of another market, or Ready before the shortage,
// does not.
func TestCapacityReturnEndsBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(t0.Add(time.Hour))
	p := fake.New("fake")
	g := fake.NewNodeGroup("spot-a", true, 0, 10) // fake.large in zone-a
	p.AddNodeGroup(g)
	c := New(nil, nil, p, plan.New(plan.Options{}), nil, nil, clk, nil,
		Options{SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: 4 * time.Hour, SpotReadyDelay: time.Second})
	ctx := context.Background()
	usable := func() bool {
		groups, err := c.spotGroups(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return len(groups) == 1
	}
	c.NodeChanged(nil, spotNode("early", "fake.large", "zone-a", 0))
	clk.Step(time.Minute)
	var f backoff.Cooldown
	f.FailStreak(clk.Now(), time.Hour, 4*time.Hour)
	c.backoff["spot-a"] = f
	clk.Step(time.Minute)
	if usable() {
		t.Fatal("a node Ready before the shortage ended the pause")
	}
	c.NodeChanged(nil, spotNode("other-zone", "fake.large", "zone-b", 0))
	c.NodeChanged(nil, spotNode("other-type", "fake.small", "zone-a", 0))
	if usable() {
		t.Fatal("a node of another market ended the pause")
	}
	c.NodeChanged(nil, spotNode("back", "fake.large", "zone-a", 0))
	if !usable() {
		t.Fatal("the group is still paused after a node of its market became Ready")
	}
	if _, ok := c.backoff["spot-a"]; ok {
		t.Error("the shortage is still recorded: the next one would pause the group longer")
	}
}

// The order groups are grown in: lowest expected price (the price with the
// cost of observed interruptions), with markets holding more than the share
// cap after the others, ties to the market with fewer spot nodes, unknown
// prices last.
func TestWeighOrder(t *testing.T) {
	type g struct {
		id    string
		price float64 // < 0: unknown
		st    MarketStats
	}
	for _, tc := range []struct {
		name   string
		weigh  Weigh
		total  int
		groups []g
		want   string
	}{
		{"price alone without interruptions", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 0,
			[]g{{"dear", 0.10, MarketStats{}}, {"cheap", 0.07, MarketStats{}}, {"unknown", -1, MarketStats{}}}, "cheap,dear,unknown"},
		// cheap: 3 interruptions in 9 node-hours (+1 prior): 0.3/h, ×2h:
		// 0.07 × 1.6 = 0.112 > 0.10.
		{"interruptions outweigh a lower price", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 0,
			[]g{{"cheap", 0.07, MarketStats{Interruptions: 3, NodeHours: 9}}, {"dear", 0.10, MarketStats{NodeHours: 9}}}, "dear,cheap"},
		{"an interruption cost of 0 orders by price", Weigh{MaxShare: 1}, 0,
			[]g{{"dear", 0.10, MarketStats{NodeHours: 9}}, {"cheap", 0.07, MarketStats{Interruptions: 3, NodeHours: 9}}}, "cheap,dear"},
		{"few interruptions do not outweigh a much lower price", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 0,
			[]g{{"dear", 0.10, MarketStats{NodeHours: 99}}, {"cheap", 0.07, MarketStats{Interruptions: 1, NodeHours: 99}}}, "cheap,dear"},
		{"equal prices: the market with fewer spot nodes first", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 6,
			[]g{{"a", 0.07, MarketStats{Nodes: 4}}, {"b", 0.07, MarketStats{Nodes: 0}}, {"c", 0.07, MarketStats{Nodes: 2}}}, "b,c,a"},
		{"a market above the share cap goes after the others", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 0.5}, 4,
			[]g{{"cheap", 0.05, MarketStats{Nodes: 3}}, {"dear", 0.09, MarketStats{Nodes: 1}}, {"dearer", 0.10, MarketStats{}}}, "dear,dearer,cheap"},
		{"at the share cap is not above it", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 0.5}, 4,
			[]g{{"cheap", 0.05, MarketStats{Nodes: 2}}, {"dear", 0.09, MarketStats{Nodes: 2}}}, "cheap,dear"},
		{"no cap at 100 %", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 4,
			[]g{{"dear", 0.09, MarketStats{Nodes: 0}}, {"cheap", 0.05, MarketStats{Nodes: 4}}}, "cheap,dear"},
		{"unknown prices by rate", Weigh{InterruptionCost: 2 * time.Hour, MaxShare: 1}, 0,
			[]g{{"risky", -1, MarketStats{Interruptions: 2, NodeHours: 9}}, {"calm", -1, MarketStats{NodeHours: 9}}}, "calm,risky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ws []weighed
			for _, x := range tc.groups {
				ng := fake.NewNodeGroup(x.id, true, 0, 10)
				ws = append(ws, weighed{group: ng, price: max(x.price, 0), known: x.price >= 0, stats: x.st})
			}
			tc.weigh.order(ws, tc.total)
			var ids []string
			for _, w := range ws {
				ids = append(ids, w.group.ID())
			}
			if got := strings.Join(ids, ","); got != tc.want {
				t.Errorf("order %s, want %s", got, tc.want)
			}
		})
	}
}
