package rescheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// The rescheduler logs the workloads that spread over zones without
// minDomains once, not at every cycle.
func TestSpreadWithoutMinDomainsLoggedOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := tu.Pod("cache-0", tu.WithUID(), tu.OnNode("od-1"), tu.OwnedBy("StatefulSet", "cache"), tu.CPU("100m"),
		tu.Spread("cache", corev1.LabelTopologyZone, 1))
	p.Status = tu.RunningReady()
	reader := crfake.NewClientBuilder().WithRuntimeObjects(p, tu.Node("od-1", tu.OnDemand())).Build()
	rec := &recorder{}
	drainer := drain.New(k8sfake.NewClientset(), clk, rec, drain.Options{Component: Component, DryRun: true})
	c := New(reader, plan.New(plan.Options{}), drainer, disruption.NewWithWindows(1), clk, rec, Options{DryRun: true})
	var lines []string
	ctx := klog.NewContext(context.Background(), funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	for range 3 {
		c.Cycle(ctx)
	}
	n := 0
	for _, l := range lines {
		if strings.Contains(l, "Workloads spread over zones without minDomains") {
			n++
			if !strings.Contains(l, "default/cache (StatefulSet)") {
				t.Errorf("the line does not name the workload: %s", l)
			}
		}
	}
	if n != 1 {
		t.Errorf("logged %d times in 3 cycles, want once:\n%s", n, strings.Join(lines, "\n"))
	}
}
