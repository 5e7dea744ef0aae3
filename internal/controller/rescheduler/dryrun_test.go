package rescheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// event is one Event a recorder was given: what the events library keys a
// series on (regarding, related, reason, action) and the note.
type event struct {
	regarding, related, reason, action, note string
}

// recorder keeps the Events it is given.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Eventf(regarding, related runtime.Object, _, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := event{regarding: name(regarding), reason: reason, action: action, note: fmt.Sprintf(note, args...)}
	if related != nil {
		e.related = name(related)
	}
	r.events = append(r.events, e)
}

func (r *recorder) with(reason string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func name(o runtime.Object) string {
	switch v := o.(type) {
	case *corev1.ObjectReference:
		return v.Kind + "/" + v.Name
	case *corev1.Node:
		return "Node/" + v.Name
	case *corev1.Pod:
		return "Pod/" + v.Namespace + "/" + v.Name
	}
	return fmt.Sprintf("%T", o)
}

// A dry run reports the whole plan it would carry out: every node it would
// drain, in the order it would drain them, not only the first.
func TestDryRunReportsEveryNodeInOrder(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var objs []runtime.Object
	// od-1 is the emptiest, then od-2, then od-3; od-4 has a pod that cannot move.
	for node, cpus := range map[string][]string{"od-1": {"100m"}, "od-2": {"200m", "100m"}, "od-3": {"500m", "500m"}} {
		for i, cpu := range cpus {
			p := tu.Pod(fmt.Sprintf("%s-%d", node, i), tu.WithUID(), tu.OnNode(node), tu.OwnedBy("ReplicaSet", node), tu.CPU(cpu))
			p.Status = tu.RunningReady()
			objs = append(objs, p)
		}
	}
	bare := tu.Pod("bare", tu.WithUID(), tu.OnNode("od-4"), tu.CPU("100m"))
	bare.Status = tu.RunningReady()
	objs = append(objs, bare,
		tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("od-3", tu.OnDemand()), tu.Node("od-4", tu.OnDemand()),
		tu.Node("spot-1", tu.Spot(), tu.Capacity("8", "32Gi")))
	reader := crfake.NewClientBuilder().WithRuntimeObjects(objs...).Build()
	rec := &recorder{}
	drainer := drain.New(k8sfake.NewClientset(), clk, rec, drain.Options{Component: Component, DryRun: true})
	c := New(reader, plan.New(plan.Options{}), drainer, disruption.NewWithWindows(1), clk, rec, Options{DryRun: true})
	c.Cycle(context.Background())

	var got []string
	for _, e := range rec.with(drain.ReasonWouldDrain) {
		got = append(got, strings.TrimPrefix(e.regarding, "Node/"))
	}
	if want := "od-1,od-2,od-3"; strings.Join(got, ",") != want {
		t.Errorf("dry run reported %v, want every node it would drain in order: %s", got, want)
	}
	for i, e := range rec.with(drain.ReasonWouldDrain) {
		if want := fmt.Sprintf("%d of 3", i+1); !strings.Contains(e.note, want) {
			t.Errorf("the dry run's Event on %s says %q: it should give its place in the plan (%s)", e.regarding, e.note, want)
		}
	}
}
