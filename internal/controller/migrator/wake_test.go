package migrator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// startHourly starts a migrator with an hourly schedule on a simulated clock
// at 09:00:30 and returns it with a function that runs the clock on by d and
// returns the runs so far (a run lists the node groups once: none here, so
// it ends there).
func startHourly(t *testing.T, opts Options) (*Controller, func(time.Duration) int) {
	t.Helper()
	hourly, err := v1alpha1.ParseSchedule("@hourly")
	if err != nil {
		t.Fatal(err)
	}
	clk := coop.NewSim(time.Date(2026, 1, 5, 9, 0, 30, 0, time.UTC))
	p := fake.New("fake")
	opts.Schedule, opts.Mode, opts.DryRun = hourly, v1alpha1.MigrationMakeBeforeBreak, true
	c := New(nil, nil, p, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil, opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		clk.RunUntil(clk.Now().Add(time.Minute))
	})
	clk.Go(func() { _ = c.Start(ctx) })
	return c, func(d time.Duration) int {
		clk.RunUntil(clk.Now().Add(d))
		return p.Calls(fake.NodeGroups)
	}
}

// A spot node that becomes Ready starts a run SpotReadyDelay later instead
// of at the next scheduled time; an on-demand node, a spot node Ready
// already, or one under a termination notice do not, and news within the
// delay joins the same run.
func TestSpotNodeReadyStartsARun(t *testing.T) {
	c, at := startHourly(t, Options{SpotReadyDelay: 30 * time.Second})
	od, spot := tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())
	if got := at(10 * time.Minute); got != 0 {
		t.Fatalf("%d runs in the first 10 minutes, want 0 (hourly)", got)
	}
	notReady := spot.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	c.NodeChanged(nil, od)
	c.NodeChanged(spot, spot)
	c.NodeChanged(notReady, tu.Node("noticed", tu.Spot(), interrupted()))
	if got := at(time.Minute); got != 0 {
		t.Errorf("an on-demand node, a spot node Ready already and an interrupted one started %d runs", got)
	}
	c.NodeChanged(notReady, spot)
	if got := at(20 * time.Second); got != 0 {
		t.Errorf("ran before SpotReadyDelay: %d runs", got)
	}
	c.NodeChanged(nil, tu.Node("spot-2", tu.Spot())) // within the delay
	if got := at(20 * time.Second); got != 1 {
		t.Errorf("%d runs 40s after a spot node became Ready, want 1", got)
	}
	if got := at(30 * time.Minute); got != 1 {
		t.Errorf("%d runs before the next scheduled time, want 1 (news within the delay joins the run)", got)
	}
	if got := at(20 * time.Minute); got != 2 {
		t.Errorf("%d runs after the next scheduled time, want 2", got)
	}
}

// With SpotReadyDelay 0 a spot node becoming Ready starts no run.
func TestSpotReadyDelayZeroStartsNoRun(t *testing.T) {
	c, at := startHourly(t, Options{})
	c.NodeChanged(nil, tu.Node("spot", tu.Spot()))
	if got := at(30 * time.Minute); got != 0 {
		t.Errorf("%d runs before the scheduled time, want 0", got)
	}
}

// A group that runs short is tried again when its pause ends, not at the
// next scheduled time: after 2m, then 4m, 8m, ... while the shortage lasts
// (each try fails a nodeReadyTimeout after the previous pause ended: the
// cloud never says why). Scheduled runs while the group rests ask it for
// nothing.
func TestRetryWhenThePauseEnds(t *testing.T) {
	od := tu.Node("od-1", tu.OnDemand())
	pod := tu.Pod("web-1", tu.OnNode("od-1"), tu.CPU("100m"), tu.OwnedBy("ReplicaSet", "web"))
	pod.Status = tu.RunningReady()
	reader := crfake.NewClientBuilder().WithObjects(od, pod).Build()
	hourly, err := v1alpha1.ParseSchedule("@hourly")
	if err != nil {
		t.Fatal(err)
	}
	clk := coop.NewSim(time.Date(2026, 1, 5, 9, 0, 30, 0, time.UTC))
	p := fake.New("fake")
	p.SetInstance("od-1", cloud.Instance{ID: "od-1"})
	g := fake.NewNodeGroup("spot", true, 0, 10) // never fulfils a request
	p.AddNodeGroup(g)
	c := New(reader, k8sfake.NewClientset(), p, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil, Options{
		Schedule: hourly, Mode: v1alpha1.MigrationMakeBeforeBreak, NodeReadyTimeout: time.Minute,
		SpotUnavailableBackoff: 2 * time.Minute, MaxSpotUnavailable: 4 * time.Hour,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		clk.RunUntil(clk.Now().Add(time.Hour))
	}()
	clk.Go(func() { _ = c.Start(ctx) })
	day := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at   time.Duration // since midnight
		want int           // requests for capacity by then
	}{
		{10*time.Hour - time.Second, 0},
		{10*time.Hour + 30*time.Second, 1},               // scheduled run; short at 10:01, rests 2m
		{10*time.Hour + 3*time.Minute + time.Second, 2},  // short at 10:04, rests 4m
		{10*time.Hour + 8*time.Minute + time.Second, 3},  // short at 10:09, rests 8m
		{10*time.Hour + 17*time.Minute + time.Second, 4}, // short at 10:18, rests 16m
		{10*time.Hour + 34*time.Minute + time.Second, 5}, // short at 10:35, rests 32m: until 11:07
		{11*time.Hour + 6*time.Minute, 5},                // the scheduled run at 11:00 leaves it alone
		{11*time.Hour + 7*time.Minute + time.Second, 6},
		{11*time.Hour + 9*time.Minute, 6}, // short at 11:08 (rests 64m)
	} {
		clk.RunUntil(day.Add(step.at))
		if got := g.Calls(fake.IncreaseSize); got != step.want {
			t.Fatalf("%d requests for spot capacity by %s, want %d", got, clk.Now().Format("15:04:05"), step.want)
		}
	}
	if n := g.Unfulfilled(); n != 0 {
		t.Errorf("%d requests left unfulfilled, want each cancelled", n)
	}
}
