package preemptible

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// The timing of these tests: a 24-hour run drained from an hour before its
// end.
var timing = Timing{MaxRunTime: 24 * time.Hour, DrainBefore: time.Hour}

// recorder keeps the Events it is given, as "node reason: note".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(regarding, _ runtime.Object, _, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if ref, ok := regarding.(*corev1.ObjectReference); ok {
		name = ref.Name
	}
	r.events = append(r.events, fmt.Sprintf("%s %s: %s", name, reason, fmt.Sprintf(note, args...)))
}

// with returns the Events of reason, as "node: note".
func (r *recorder) with(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if node, rest, _ := strings.Cut(e, " "); strings.HasPrefix(rest, reason+": ") {
			out = append(out, node+": "+strings.TrimPrefix(rest, reason+": "))
		}
	}
	return out
}

// fixture is a real apiserver and a controller on a fake clock.
type fixture struct {
	env    *testenv.Env
	ctx    context.Context
	reader client.Reader
}

func newFixture(t *testing.T) *fixture {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 5*time.Minute)
	reader, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, ctx: ctx, reader: reader}
}

// controller returns a controller of the fixture's cluster on clk.
func (f *fixture) controller(t *testing.T, clk *testingclock.FakeClock, budget *disruption.Budget, rec *recorder, dryRun bool) *Controller {
	t.Helper()
	sel, err := v1alpha1.ParseSelector(v1alpha1.GKEPreemptibleSelector)
	if err != nil {
		t.Fatal(err)
	}
	drainer := drain.New(f.env.Client, clk, rec, drain.Options{Component: Component, Cordon: true, DryRun: dryRun})
	return New(f.reader, f.env.Client, &classify.Classifier{}, drainer, budget, clk, rec, Options{
		Selectors: []labels.Selector{sel}, Timing: timing, ReplacementTimeout: time.Minute, OnRestart: drain.Resume, DryRun: dryRun})
}

// node creates a node labelled preemptible by GKE (unless plain), Ready
// (unless notReady) in boot "b1", and returns it as the apiserver stamped it.
func (f *fixture) node(t *testing.T, name string, opts ...func(*corev1.Node)) *corev1.Node {
	t.Helper()
	n := tu.Node(name, tu.Capacity("4", "16Gi"), tu.NodeLabel(classify.GKEPreemptibleLabel, "true"))
	for _, o := range opts {
		o(n)
	}
	status := n.Status
	n, err := f.env.Client.CoreV1().Nodes().Create(f.ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status.NodeInfo.BootID == "" {
		status.NodeInfo.BootID = "b1"
	}
	if len(status.Conditions) == 0 {
		status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: n.CreationTimestamp}}
	}
	n.Status = status
	if n, err = f.env.Client.CoreV1().Nodes().UpdateStatus(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without the not-ready taint admission put on it, as the node
	// lifecycle controller would remove it.
	n.Spec.Taints = nil
	if n, err = f.env.Client.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n
}

func notReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
}

func boot(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.NodeInfo.BootID = id }
}

func plain(n *corev1.Node) { delete(n.Labels, classify.GKEPreemptibleLabel) }

// pod creates a Running pod of a ReplicaSet on node, deleted at once when
// evicted.
func (f *fixture) pod(t *testing.T, name, node string) {
	t.Helper()
	p, err := f.env.Client.CoreV1().Pods("default").Create(f.ctx,
		tu.Pod(name, tu.OnNode(node), tu.OwnedBy("ReplicaSet", name), tu.CPU("100m"), tu.GracePeriod(0)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = tu.RunningReady()
	if _, err := f.env.Client.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) podExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := f.env.Client.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func (f *fixture) get(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := f.env.Client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cleanUp deletes every node and pod, at once.
func (f *fixture) cleanUp(t *testing.T) {
	now := int64(0)
	if err := f.env.Client.CoreV1().Pods("default").DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &now}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
	if err := f.env.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
}

// after waits until the apiserver's clock, which stamps creationTimestamp in
// whole seconds, is at least d past stamp.
func after(stamp metav1.Time, d time.Duration) {
	for time.Now().Before(stamp.Add(d + time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
}

// state is what a test checks of a node: cordoned, drain record, drain
// marks.
func state(n *corev1.Node) string {
	_, marked, _ := drain.MarkOf(n)
	_, recorded := n.Annotations[DrainedAnnotation]
	return fmt.Sprintf("cordoned=%v recorded=%v marked=%v", n.Spec.Unschedulable, recorded, marked)
}

func TestController(t *testing.T) {
	f := newFixture(t)

	// Due nodes are drained one per cycle with the budget's only slot, the
	// run that ends first first (pre-b registered before pre-a), and stay
	// cordoned with a record; a young node, a node that is not Ready, an
	// excluded node and a node that is not preemptible are left alone; a
	// drained node is not drained again.
	t.Run("drains due nodes one at a time, oldest first", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		b := f.node(t, "pre-b")
		after(b.CreationTimestamp, time.Second)
		a := f.node(t, "pre-a")
		excluded := f.node(t, "pre-excluded", tu.NodeLabel(classify.ExcludeLabel, "true"))
		down := f.node(t, "pre-down", notReady)
		od := f.node(t, "od-1", plain)
		after(a.CreationTimestamp, time.Second)
		young := f.node(t, "pre-young")
		for _, n := range []*corev1.Node{b, a, excluded, down, od, young} {
			f.pod(t, "web-"+n.Name, n.Name)
		}
		// Both older nodes are due, the young one a second or more later.
		now := a.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore)
		if !young.CreationTimestamp.After(a.CreationTimestamp.Time) {
			t.Fatalf("pre-young registered at %s, not after pre-a (%s)", young.CreationTimestamp, a.CreationTimestamp)
		}
		clk := testingclock.NewFakeClock(now)
		budget := disruption.NewWithWindows(1)
		rec := &recorder{}
		c := f.controller(t, clk, budget, rec, false)

		if wait := c.Cycle(f.ctx); wait != time.Second {
			t.Errorf("after a drain the next cycle comes in %s, want 1s", wait)
		}
		if f.podExists(t, "web-pre-b") || !f.podExists(t, "web-pre-a") {
			t.Errorf("first cycle: pre-b (the oldest) should be drained, and only it")
		}
		if budget.InUse() != 0 {
			t.Errorf("%d budget slots held after the cycle", budget.InUse())
		}
		wait := c.Cycle(f.ctx)
		if f.podExists(t, "web-pre-a") {
			t.Errorf("second cycle: pre-a not drained")
		}
		if wait != time.Second {
			t.Errorf("after the second drain the next cycle comes in %s, want 1s", wait)
		}
		wait = c.Cycle(f.ctx)
		youngDue := young.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore)
		if want := youngDue.Sub(now); wait != want {
			t.Errorf("with nothing due the loop waits %s, want %s (until pre-young is due)", wait, want)
		}
		for _, name := range []string{"pre-b", "pre-a"} {
			n := f.get(t, name)
			if got := state(n); got != "cordoned=true recorded=true marked=false" {
				t.Errorf("%s after its drain: %s, want cordoned with a record and no drain marks", name, got)
			}
			r, err := RecordOf(n)
			if err != nil || r == nil || r.BootID != "b1" || !r.Cordoned || !r.RunEnd.Time.Equal(n.CreationTimestamp.Add(timing.MaxRunTime)) {
				t.Errorf("%s's record %+v %v: want boot b1, the cordon its own, the run's end", name, r, err)
			}
		}
		for _, name := range []string{"pre-excluded", "pre-down", "od-1", "pre-young"} {
			if !f.podExists(t, "web-"+name) || state(f.get(t, name)) != "cordoned=false recorded=false marked=false" {
				t.Errorf("%s was touched: %s", name, state(f.get(t, name)))
			}
		}
		if got := rec.with(drain.ReasonDrainStarted); len(got) != 2 || !strings.HasPrefix(got[0], "pre-b: ") || !strings.HasPrefix(got[1], "pre-a: ") ||
			!strings.Contains(got[0], "its preemptible VM's run ends at") {
			t.Errorf("drain Events %q, want pre-b then pre-a, saying why", got)
		}
		if got := testutil.ToFloat64(nodes.WithLabelValues(string(Drained))); got != 2 {
			t.Errorf("spotter_preemptible_nodes{state=drained} %v, want 2", got)
		}
		if got := testutil.ToFloat64(nodes.WithLabelValues(string(Due))); got != 1 {
			t.Errorf("spotter_preemptible_nodes{state=due} %v, want 1 (pre-down, not Ready)", got)
		}

		// pre-young becomes due: drained in turn.
		clk.SetTime(youngDue)
		c.Cycle(f.ctx)
		if f.podExists(t, "web-pre-young") {
			t.Error("pre-young not drained once due")
		}
		if got := rec.with(drain.ReasonDrainStarted); len(got) != 3 {
			t.Errorf("drain Events %q: a drained node was drained again", got)
		}
	})

	// A due node whose drain the budget never allows is reported once when
	// its run ends, with the reason, and counted; it is never drained.
	t.Run("a run that ended undrained is reported", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		n := f.node(t, "pre-1")
		f.pod(t, "web-0", "pre-1")
		clk := testingclock.NewFakeClock(n.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore))
		budget := disruption.NewWithWindows(1)
		if err := budget.Acquire("od-9", "migrator"); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		c := f.controller(t, clk, budget, rec, false)
		before := testutil.ToFloat64(notDrained)
		c.Cycle(f.ctx)
		clk.SetTime(n.CreationTimestamp.Add(timing.MaxRunTime))
		c.Cycle(f.ctx)
		c.Cycle(f.ctx)
		got := rec.with(ReasonNotDrained)
		if len(got) != 1 || !strings.Contains(got[0], "disruption budget spent") || !strings.Contains(got[0], "left to the preemption notice") {
			t.Errorf("Events %q, want one saying the budget was spent and the pods are left to the notice", got)
		}
		if d := testutil.ToFloat64(notDrained) - before; d != 1 {
			t.Errorf("spotter_preemptible_not_drained_total grew by %v, want 1", d)
		}
		if !f.podExists(t, "web-0") || state(f.get(t, "pre-1")) != "cordoned=false recorded=false marked=false" {
			t.Errorf("pre-1 was drained or marked: %s", state(f.get(t, "pre-1")))
		}
	})

	// Outside the drain windows a due node waits, and the loop wakes when
	// the next window opens.
	t.Run("waits for the drain window", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		n := f.node(t, "pre-1")
		f.pod(t, "web-0", "pre-1")
		now := n.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore).UTC()
		opens := now.Truncate(time.Minute).Add(20 * time.Minute)
		sched, err := v1alpha1.ParseSchedule(fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()))
		if err != nil {
			t.Fatal(err)
		}
		clk := testingclock.NewFakeClock(now)
		c := f.controller(t, clk, disruption.NewWithWindows(1, disruption.Window{Schedule: sched, Duration: 10 * time.Minute}), &recorder{}, false)
		c.opts.Interval = time.Hour
		if wait := c.Cycle(f.ctx); wait != opens.Sub(now) {
			t.Errorf("outside the window the loop waits %s, want %s (until it opens)", wait, opens.Sub(now))
		}
		if !f.podExists(t, "web-0") {
			t.Fatal("drained outside the drain window")
		}
		clk.SetTime(opens)
		c.Cycle(f.ctx)
		if f.podExists(t, "web-0") {
			t.Error("not drained once the window opened")
		}
	})

	// A dry run changes nothing and reports each due node once.
	t.Run("dry run", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		n := f.node(t, "pre-1")
		f.pod(t, "web-0", "pre-1")
		clk := testingclock.NewFakeClock(n.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore))
		rec := &recorder{}
		c := f.controller(t, clk, disruption.NewWithWindows(1), rec, true)
		c.Cycle(f.ctx)
		c.Cycle(f.ctx)
		if got := rec.with(drain.ReasonWouldDrain); len(got) != 1 || !strings.Contains(got[0], "dry run: would drain this node, 1 of 1 due") {
			t.Errorf("dry-run Events %q, want one", got)
		}
		if !f.podExists(t, "web-0") || state(f.get(t, "pre-1")) != "cordoned=false recorded=false marked=false" {
			t.Errorf("a dry run changed pre-1: %s", state(f.get(t, "pre-1")))
		}
	})

	// A node drained in an earlier boot (its VM replaced under the same Node
	// object) gets its record lifted, and the cordon too when it was the
	// controller's; a record of this boot stays.
	t.Run("lifts the record of a replaced VM", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		record := func(r Record, cordoned bool) func(*corev1.Node) {
			return func(n *corev1.Node) {
				data, _ := json.Marshal(r)
				n.Annotations = map[string]string{DrainedAnnotation: string(data)}
				n.Spec.Unschedulable = cordoned
			}
		}
		ours := f.node(t, "pre-ours", boot("b2"), record(Record{BootID: "b1", Cordoned: true}, true))
		f.node(t, "pre-theirs", boot("b2"), record(Record{BootID: "b1"}, true))
		f.node(t, "pre-same", boot("b1"), record(Record{BootID: "b1", Cordoned: true}, true))
		rec := &recorder{}
		c := f.controller(t, testingclock.NewFakeClock(ours.CreationTimestamp.Add(time.Hour)), disruption.NewWithWindows(1), rec, false)
		c.Cycle(f.ctx)
		for name, want := range map[string]string{
			"pre-ours":   "cordoned=false recorded=false marked=false",
			"pre-theirs": "cordoned=true recorded=false marked=false",
			"pre-same":   "cordoned=true recorded=true marked=false",
		} {
			if got := state(f.get(t, name)); got != want {
				t.Errorf("%s: %s, want %s", name, got, want)
			}
		}
		if got := rec.with(ReasonReplaced); len(got) != 2 {
			t.Errorf("Events %q, want one on each replaced node", got)
		}
	})

	// An unfinished drain of the controller (the process stopped mid-drain)
	// is resumed before any other due node; one on a node that is not due
	// is rolled back.
	t.Run("resumes an unfinished drain first, rolls back one not due", func(t *testing.T) {
		t.Cleanup(func() { f.cleanUp(t) })
		crashed := func(n *corev1.Node) {
			n.Annotations = map[string]string{drain.DrainingAnnotation: fmt.Sprintf(`{"by":%q,"reason":"interrupted","at":"2026-01-01T00:00:00Z","cordoned":true}`, Component)}
			n.Spec.Unschedulable = true
		}
		old := f.node(t, "pre-old")
		after(old.CreationTimestamp, time.Second)
		resumed := f.node(t, "pre-resumed", crashed)
		after(resumed.CreationTimestamp, time.Second)
		young := f.node(t, "pre-young", crashed)
		for _, n := range []string{"pre-old", "pre-resumed", "pre-young"} {
			f.pod(t, "web-"+n, n)
		}
		clk := testingclock.NewFakeClock(resumed.CreationTimestamp.Add(timing.MaxRunTime - timing.DrainBefore))
		if !young.CreationTimestamp.After(resumed.CreationTimestamp.Time) {
			t.Fatal("pre-young registered with pre-resumed")
		}
		c := f.controller(t, clk, disruption.NewWithWindows(1), &recorder{}, false)
		c.Cycle(f.ctx)
		if f.podExists(t, "web-pre-resumed") || !f.podExists(t, "web-pre-old") {
			t.Error("the unfinished drain of pre-resumed should go before pre-old's")
		}
		if r, _ := RecordOf(f.get(t, "pre-resumed")); r == nil || !r.Cordoned {
			t.Errorf("pre-resumed's record %+v: the cordon its unfinished drain made is the controller's", r)
		}
		if got := state(f.get(t, "pre-young")); got != "cordoned=false recorded=false marked=false" || !f.podExists(t, "web-pre-young") {
			t.Errorf("pre-young (not due) after the cycle: %s, want its unfinished drain rolled back", got)
		}
	})
}
