package migrator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// A drain's re-check asks the spot group for one more node only when a pod
// bound for spot no longer fits after the drain has let a pod go, at most
// limit times; before that, for a pod bound for an on-demand node, and once
// the limit is spent, the re-check's error ends the drain as it is. A node
// that does not come ends it too, with the group's failure added. (The lab's
// TestMigratorTopsUpADrain has a node come, and the drain finish.)
func TestTopUpDecisions(t *testing.T) {
	c, g, _ := spotController(Options{NodeReadyTimeout: time.Minute, SpotUnavailableBackoff: time.Second, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	node := tu.Node("od-1", tu.OnDemand())
	np := &plan.NodePlan{Pods: []plan.PodPlan{
		{Namespace: "default", Name: "a"},
		{Namespace: "default", Name: "b"},
		{Namespace: "default", Name: "pinned", OnDemand: true},
	}}
	gone := errors.New("no longer fits on spot: 0/1 spot nodes fit")
	fits := map[string]bool{"a": true}
	recheck := func(_ context.Context, pod *corev1.Pod) error {
		if fits[pod.Name] {
			return nil
		}
		return gone
	}
	hook := c.topUp(node, g, 1, np, recheck)
	asked := func() int { return g.Calls(fake.IncreaseSize) }
	// Every request fails at once: one made where none should be shows in
	// asked(), rather than waiting for a node on a clock that does not move.
	refuse := func() { g.SetNextError(fake.IncreaseSize, errors.New("InsufficientInstanceCapacity")) }
	refuse()

	// Nothing evicted yet: the drain ends, nothing is asked for.
	if err := hook(ctx, tu.Pod("b")); !errors.Is(err, gone) || errors.Is(err, drain.ErrNotNow) {
		t.Fatalf("before any pod went: %v, want the re-check's error", err)
	}
	if asked() != 0 {
		t.Fatalf("the group was asked %d time(s) before the drain let any pod go", asked())
	}
	if err := hook(ctx, tu.Pod("a")); err != nil {
		t.Fatalf("a pod that fits: %v", err)
	}
	refuse()
	// A pod bound for an on-demand node: a spot node would not help.
	if err := hook(ctx, tu.Pod("pinned")); !errors.Is(err, gone) || asked() != 0 {
		t.Fatalf("pod bound for on-demand: %v, group asked %d time(s); want the re-check's error and no request", err, asked())
	}
	// A pod bound for spot after one went: one node is asked for; it does
	// not come, and the drain ends with both reasons.
	err := hook(ctx, tu.Pod("b"))
	if !errors.Is(err, gone) || errors.Is(err, drain.ErrNotNow) || !strings.Contains(err.Error(), "could not add a node") {
		t.Fatalf("no node came: %v, want the re-check's error and the group's failure", err)
	}
	if asked() != 1 {
		t.Fatalf("the group was asked %d time(s), want 1", asked())
	}
	// The limit (1) is spent.
	refuse()
	if err := hook(ctx, tu.Pod("b")); !errors.Is(err, gone) || asked() != 1 {
		t.Fatalf("limit spent: %v, group asked %d time(s); want the re-check's error and no new request", err, asked())
	}
}
