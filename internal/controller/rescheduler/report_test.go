package rescheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// reversed is a cache that lists pods in the reverse of name order: an
// informer's cache lists in no particular order.
type reversed struct{ client.Reader }

func (r reversed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok {
		slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(b.Name, a.Name) })
	}
	return nil
}

// Why a node is not drainable is the reason `spotter plan` gives (which reads
// pods in the apiserver's order, by namespace and name), whatever order the
// cache lists them in; and when the reason changes, the new one reaches
// `kubectl describe node`: the events library merges an Event into the series
// of an earlier one with the same type, reason, action, regarding and related
// objects and keeps the first note (client-go v0.37.1
// tools/events/event_broadcaster.go, getKey), so the new Event must differ
// from the old one in one of those.
func TestNotDrainableReasonIsThePlansAndShowsWhenItChanges(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var objs []runtime.Object
	for _, name := range []string{"a", "b", "c"} {
		// A pod without a controller cannot move: each blocks the node.
		p := tu.Pod(name, tu.WithUID(), tu.OnNode("od-1"), tu.CPU("100m"))
		p.Status = tu.RunningReady()
		objs = append(objs, p)
	}
	objs = append(objs, tu.Node("od-1", tu.OnDemand()), tu.Node("spot-1", tu.Spot()))
	fake := crfake.NewClientBuilder().WithRuntimeObjects(objs...).Build()
	rec := &recorder{}
	c := New(reversed{fake}, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, rec, Options{})
	ctx := context.Background()

	c.Cycle(ctx)
	events := rec.with("SpotterNotDrainable")
	if len(events) != 1 || !strings.Contains(events[0].note, "pod default/a:") {
		t.Fatalf("Events %+v, want one naming pod default/a, as spotter plan does", events)
	}
	c.Cycle(ctx)
	if got := len(rec.with("SpotterNotDrainable")); got != 1 {
		t.Errorf("%d Events after a second cycle with the same reason, want 1: record on change only", got)
	}

	// The first blocking pod goes: the reason changes.
	if err := fake.Delete(ctx, objs[0].(*corev1.Pod)); err != nil {
		t.Fatal(err)
	}
	c.Cycle(ctx)
	events = rec.with("SpotterNotDrainable")
	if len(events) != 2 || !strings.Contains(events[1].note, "pod default/b:") {
		t.Fatalf("Events %+v, want a second one naming pod default/b", events)
	}
	first, second := events[0], events[1]
	first.note, second.note = "", ""
	if first == second {
		t.Errorf("the Event of the new reason has the series key of the old one (%+v): the events library would merge it and show only the first reason", first)
	}
}

// The first cycle has a verdict for every on-demand node; they are recorded
// maxVerdictEvents a cycle, each once, so that they never queue ahead of the
// Events of a drain by thousands.
func TestVerdictEventsArePaced(t *testing.T) {
	const nodes = 2*maxVerdictEvents + 7
	verdictEventsPaced(t, nodes, []int{maxVerdictEvents, 2 * maxVerdictEvents, nodes, nodes})
}

// The same at 5,000 on-demand nodes, the scale of BenchmarkControllerAtScale:
// its first cycles record 50 verdict Events each, not thousands.
func TestVerdictEventsArePacedAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 5,000 nodes a cycle")
	}
	verdictEventsPaced(t, 5000, []int{maxVerdictEvents, 2 * maxVerdictEvents, 3 * maxVerdictEvents})
}

// verdictEventsPaced runs len(want) cycles over nodes on-demand nodes and
// checks the verdict Events recorded after each, and that no node has two.
func verdictEventsPaced(t *testing.T, nodes int, want []int) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var objs []runtime.Object
	for i := range nodes {
		objs = append(objs, tu.Node(fmt.Sprintf("od-%04d", i), tu.OnDemand()))
	}
	fake := crfake.NewClientBuilder().WithRuntimeObjects(objs...).Build()
	rec := &recorder{}
	c := New(fake, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, rec, Options{})
	ctx := context.Background()
	for cycle, want := range want {
		c.Cycle(ctx)
		verdicts := append(rec.with("SpotterNotDrainable"), rec.with("SpotterDrainable")...)
		seen := map[string]bool{}
		for _, e := range verdicts {
			if seen[e.regarding] {
				t.Errorf("cycle %d: node %s has two verdict Events", cycle+1, e.regarding)
			}
			seen[e.regarding] = true
		}
		if len(verdicts) != want {
			t.Errorf("after cycle %d: %d verdict Events, want %d", cycle+1, len(verdicts), want)
		}
	}
}
