package rescheduler

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// After a drain of od-1, the replacements of its pods are sorted: one back on
// od-1 itself (a StatefulSet's pod, recreated once the drain had ended) is
// returned, whatever its workload; one on another on-demand node is
// misplaced, unless a consolidation sent its workload there; one on spot is
// neither.
func TestReplacementsSorted(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	running := func(name, node, kind, owner string) *corev1.Pod {
		p := tu.Pod(name, tu.WithUID(), tu.OnNode(node), tu.OwnedBy(kind, owner))
		p.Status = tu.RunningReady()
		return p
	}
	old := running("web-old", "spot-1", "ReplicaSet", "web")
	reader := crfake.NewClientBuilder().WithObjects(
		tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("spot-1", tu.Spot()),
		old,
		running("db-0", "od-1", "StatefulSet", "db"),
		running("web-new", "od-2", "ReplicaSet", "web"),
		running("cache-0", "od-2", "StatefulSet", "cache"),
		running("api-new", "spot-1", "ReplicaSet", "api"),
	).Build()
	c := New(reader, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil, Options{ReplacementTimeout: time.Minute})
	uid := func(kind, name string) types.UID { return types.UID(kind + "-" + name) }
	owners := map[types.UID]bool{uid("ReplicaSet", "web"): true, uid("StatefulSet", "db"): true, uid("StatefulSet", "cache"): true, uid("ReplicaSet", "api"): true}
	// db and cache were sent to on-demand nodes by the consolidation.
	toOnDemand := map[types.UID]bool{uid("StatefulSet", "db"): true, uid("StatefulSet", "cache"): true}
	misplaced, returned := c.waitReplacements(context.Background(), "od-1", owners, map[types.UID]bool{old.UID: true}, toOnDemand)
	if !slices.Equal(misplaced, []string{"default/web-new@od-2"}) {
		t.Errorf("misplaced %v, want [default/web-new@od-2]", misplaced)
	}
	if !slices.Equal(returned, []string{"default/db-0"}) {
		t.Errorf("returned %v, want [default/db-0]", returned)
	}
}

// A node emptied again less than an hour after the rescheduler emptied it
// counts as emptied again; an hour or more later, or a first time, not.
func TestEmptiedAgain(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(crfake.NewClientBuilder().Build(), plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), testingclock.NewFakeClock(start), nil, Options{})
	for _, tc := range []struct {
		node  string
		after time.Duration
		want  bool
	}{
		{"od-1", 0, false},
		{"od-2", 0, false},
		{"od-1", 12 * time.Minute, true},
		{"od-1", 73 * time.Minute, false},
		{"od-1", 133*time.Minute - time.Second, true},
	} {
		if got := c.emptiedAgain(tc.node, start.Add(tc.after)); got != tc.want {
			t.Errorf("%s emptied at +%s: again = %v, want %v", tc.node, tc.after, got, tc.want)
		}
	}
}
