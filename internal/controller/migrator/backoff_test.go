package migrator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// spotController is a migrator over one fake spot group (0 to 10 nodes), on a
// fake clock, with a fake clientset: pure logic.
func spotController(opts Options) (*Controller, *fake.NodeGroup, *testingclock.FakeClock) {
	c, g, clk, _ := spotControllerEvents(opts)
	return c, g, clk
}

// spotControllerEvents is spotController with the Events it records.
func spotControllerEvents(opts Options) (*Controller, *fake.NodeGroup, *testingclock.FakeClock, *events.FakeRecorder) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := fake.New("fake")
	g := fake.NewNodeGroup("spot", true, 0, 10)
	p.AddNodeGroup(g)
	rec := events.NewFakeRecorder(100)
	c := New(nil, k8sfake.NewClientset(), p, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, rec, opts)
	return c, g, clk, rec
}

// Spot capacity that does not come within nodeReadyTimeout, on the injected
// clock, is cancelled and its group backed off: for spotUnavailableBackoff,
// twice as long after each further shortage, never more than
// maxSpotUnavailableBackoff, also after many shortages.
func TestSpotBackoffOnTheClock(t *testing.T) {
	const week = 7 * 24 * time.Hour
	c, g, clk := spotController(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Second, MaxSpotUnavailable: week})
	ctx := context.Background()
	node := tu.Node("od-1", tu.OnDemand())
	usable := func() bool {
		groups, err := c.spotGroups(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return len(groups) == 1
	}

	// The first shortage: nothing comes Ready within ten minutes of the
	// clock, and the cloud says nothing of why.
	done := make(chan bool)
	go func() {
		delivered, _ := c.addCapacity(ctx, node, g, 1, false)
		done <- delivered
	}()
	for waited := time.Duration(0); waited < 10*time.Minute; waited += time.Second {
		waitParked(t, clk, 1)
		select {
		case <-done:
			t.Fatalf("gave up on spot capacity after %s, want the node ready timeout of 10m", waited)
		default:
		}
		clk.Step(time.Second)
	}
	if <-done {
		t.Fatal("addCapacity reported capacity that never came")
	}
	if n := g.Unfulfilled(); n != 0 {
		t.Errorf("%d requests left after the timeout, want the request cancelled", n)
	}

	// Then each shortage (the group refuses at once) doubles the rest of the
	// group, up to a week.
	for shortages := 1; shortages <= 30; shortages++ {
		rest := week
		if shortages <= 20 {
			rest = min(time.Second<<(shortages-1), week)
		}
		clk.Step(rest - time.Second)
		if usable() {
			t.Fatalf("after %d shortages the group is used again %s later, want a rest of %s", shortages, rest-time.Second, rest)
		}
		clk.Step(time.Second)
		if !usable() {
			t.Fatalf("after %d shortages the group is still backed off once its rest of %s ended", shortages, rest)
		}
		g.SetNextError(fake.IncreaseSize, cloud.NewCapacityUnavailableError("spot", errors.New("no spot capacity")))
		if delivered, short := c.addCapacity(ctx, node, g, 1, false); delivered || !short {
			t.Fatalf("addCapacity: delivered %v, short %v; want short, as IncreaseSize failed", delivered, short)
		}
	}
}

// A stock-out the cloud reports on the waiting requests (it accepted them,
// then could not fulfil them) ends the wait at the next poll, not at
// nodeReadyTimeout: the requests are cancelled and the group backed off.
func TestStockOutReportedLaterEndsTheWait(t *testing.T) {
	c, g, clk, rec := spotControllerEvents(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	done := make(chan [2]bool)
	go func() {
		delivered, short := c.addCapacity(ctx, tu.Node("od-1", tu.OnDemand()), g, 2, false)
		done <- [2]bool{delivered, short}
	}()
	waitParked(t, clk, 1) // the first poll found the requests waiting
	g.SetCapacityUnavailable(true)
	clk.Step(time.Second)
	select {
	case got := <-done:
		if got != [2]bool{false, true} {
			t.Fatalf("delivered, short = %v, want short at the poll after the stock-out", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for the capacity a poll after the cloud reported the stock-out")
	}
	if n := g.Unfulfilled(); n != 0 {
		t.Errorf("%d requests left, want them cancelled", n)
	}
	if groups, err := c.spotGroups(ctx, clk.Now()); err != nil || len(groups) != 0 {
		t.Errorf("usable groups %v (%v), want the short group backed off", groups, err)
	}
	wantEvent(t, rec, ReasonSpotRequested, ReasonSpotUnavailable)
}

// Throttling is no shortage: the request is asked again after the cloud's
// Retry-After, on the clock, and then delivered; the group is not backed off.
func TestThrottledRequestIsAskedAgain(t *testing.T) {
	c, g, clk, rec := spotControllerEvents(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	g.SetNextError(fake.IncreaseSize, cloud.NewThrottledError(errors.New("Rate exceeded"), 7*time.Second))
	done := make(chan [2]bool)
	go func() {
		delivered, short := c.addCapacity(ctx, tu.Node("od-1", tu.OnDemand()), g, 1, false)
		done <- [2]bool{delivered, short}
	}()
	waitParked(t, clk, 1)
	clk.Step(6 * time.Second)
	if n := g.Calls(fake.IncreaseSize); n != 1 {
		t.Fatalf("%d IncreaseSize calls 6s after a Retry-After of 7s, want 1", n)
	}
	clk.Step(time.Second)
	waitParked(t, clk, 1) // asked again, now waiting for the node
	if n := g.Calls(fake.IncreaseSize); n != 2 {
		t.Fatalf("%d IncreaseSize calls after the Retry-After, want 2", n)
	}
	for _, n := range g.Fulfill(1) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Second)
	if got := <-done; got != [2]bool{true, false} {
		t.Fatalf("delivered, short = %v, want delivered", got)
	}
	if _, backedOff := c.backoff[g.ID()]; backedOff {
		t.Error("the throttled group was backed off")
	}
	wantEvent(t, rec, ReasonSpotRequested)
}

// A refusal that is not a shortage (access denied, a malformed group) is an
// error of the group: an Event says so, the caller moves on (short), and the
// group is not backed off.
func TestRefusedRequestIsNoShortage(t *testing.T) {
	c, g, clk, rec := spotControllerEvents(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	g.SetNextError(fake.IncreaseSize, errors.New("AccessDenied: not authorized to perform autoscaling:SetDesiredCapacity"))
	if delivered, short := c.addCapacity(ctx, tu.Node("od-1", tu.OnDemand()), g, 1, false); delivered || !short {
		t.Fatalf("delivered %v, short %v; want the next group tried", delivered, short)
	}
	if groups, err := c.spotGroups(ctx, clk.Now()); err != nil || len(groups) != 1 {
		t.Errorf("usable groups %v (%v), want the group not backed off", groups, err)
	}
	wantEvent(t, rec, ReasonSpotRequestFailed)
}

// wantEvent checks the reasons of the Events recorded, in order.
func wantEvent(t *testing.T, rec *events.FakeRecorder, reasons ...string) {
	t.Helper()
	var got []string
	for len(rec.Events) > 0 {
		e := <-rec.Events
		got = append(got, e)
	}
	if len(got) != len(reasons) {
		t.Fatalf("Events %q, want reasons %q", got, reasons)
	}
	for i, r := range reasons {
		if !strings.Contains(got[i], " "+r+" ") {
			t.Errorf("Event %d: %q, want reason %s", i, got[i], r)
		}
	}
}

// A new node takes pods once Ready, uncordoned and rid of the lifecycle
// taints it starts with; a taint of its kind (a spot taint the pods
// tolerate) or a PreferNoSchedule one does not hold it back.
func TestTakesPods(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	node := func(unschedulable bool, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}
	}
	notReady := node(false)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"Ready", node(false), true},
		{"not Ready", notReady, false},
		{"cordoned", node(true), false},
		{"not-ready taint still on", node(false, corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}), false},
		{"uninitialized", node(false, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}), false},
		{"spot taint", node(false, corev1.Taint{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}), true},
		{"PreferNoSchedule", node(false, corev1.Taint{Key: "node.kubernetes.io/whatever", Effect: corev1.TaintEffectPreferNoSchedule}), true},
	} {
		if got := takesPods(tc.node); got != tc.want {
			t.Errorf("%s: takesPods = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A request that ends short leaves nothing idle: an instance that runs but
// never became a node is deleted, and a node that came but is too little
// for the node's pods, and that no pod took, is given back, each through
// the group, counted and said.
func TestShortRequestLeavesNothingIdle(t *testing.T) {
	c, g, clk, rec := spotControllerEvents(Options{NodeReadyTimeout: time.Minute, SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	done := make(chan [2]bool)
	go func() {
		delivered, short := c.addCapacity(ctx, tu.Node("od-1", tu.OnDemand()), g, 3, false)
		done <- [2]bool{delivered, short}
	}()
	waitParked(t, clk, 1)
	for _, n := range g.Fulfill(1) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	silent := g.FulfillSilently(1)
	clk.Step(time.Minute)
	select {
	case got := <-done:
		if got != [2]bool{false, true} {
			t.Fatalf("delivered, short = %v, want short", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after nodeReadyTimeout")
	}
	if got := g.Deleted(); len(got) != 2 || g.Unfulfilled() != 0 {
		t.Errorf("deleted %v with %d requests left; want the silent instance (%s) and the idle node deleted, the last request cancelled", got, g.Unfulfilled(), silent)
	}
	if target, _ := g.TargetSize(ctx); target != 0 {
		t.Errorf("target size %d, want 0: nothing of the short request is kept", target)
	}
	for kind, want := range map[string]float64{labelUnregistered: 1, labelUnused: 1} {
		if got := testutil.ToFloat64(spotGivenBack.WithLabelValues("spot", kind)); got != want {
			t.Errorf("spot_given_back_total{kind=%s} = %v, want %v", kind, got, want)
		}
	}
	wantEvent(t, rec, ReasonSpotRequested, ReasonSpotUnavailable, ReasonSpotGivenBack, ReasonSpotGivenBack)
}

// A stock-out reported while an instance the cloud did launch is still
// coming up: the unfulfilled request is cancelled at once, the launched
// instance is waited for, and once it is a node too few for the candidate's
// pods, it is given back: nothing idle.
func TestStockOutWaitsForWhatWasLaunched(t *testing.T) {
	c, g, clk, rec := spotControllerEvents(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Hour, MaxSpotUnavailable: time.Hour})
	ctx := context.Background()
	done := make(chan [2]bool)
	go func() {
		delivered, short := c.addCapacity(ctx, tu.Node("od-1", tu.OnDemand()), g, 2, false)
		done <- [2]bool{delivered, short}
	}()
	waitParked(t, clk, 1)
	launched := g.Fulfill(1)[0] // its Node registers, not Ready yet
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, launched, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.SetCapacityUnavailable(true)
	clk.Step(time.Second)
	waitParked(t, clk, 1)
	select {
	case got := <-done:
		t.Fatalf("gave up (%v) while a launched instance was coming up", got)
	default:
	}
	if n := g.Unfulfilled(); n != 0 {
		t.Errorf("%d requests left after the stock-out, want the unfulfilled one cancelled at once", n)
	}
	launched.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, launched, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	select {
	case got := <-done:
		if got != [2]bool{false, true} {
			t.Fatalf("delivered, short = %v, want short", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting once the launched instance was a node")
	}
	if got := g.Deleted(); len(got) != 1 || got[0] != launched.Name {
		t.Errorf("deleted %v, want the idle %s given back", got, launched.Name)
	}
	wantEvent(t, rec, ReasonSpotRequested, ReasonSpotUnavailable, ReasonSpotGivenBack)
}
