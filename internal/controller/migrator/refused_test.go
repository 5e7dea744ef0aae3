package migrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/plan"
)

// checker is a fake provider that also checks control planes.
type checker struct {
	*fake.Provider
	found []*cloud.ControlPlaneError
	err   error
}

func (c *checker) SpotControlPlanes(context.Context) ([]*cloud.ControlPlaneError, error) {
	return c.found, c.err
}

// Control planes the provider finds on spot are counted under kind
// control_plane, a failed check under unchecked, through the metrics decorator
// as the controller wires the provider; the groups go on being used.
func TestRefusedControlPlanesCounted(t *testing.T) {
	p := &checker{Provider: fake.New("fake"), found: []*cloud.ControlPlaneError{
		{Kind: cloud.KindControlPlane, Name: "KubeadmControlPlane/ns/cp", Reason: "spot template"},
	}}
	p.AddNodeGroup(fake.NewNodeGroup("spot", true, 0, 10))
	clk := testingclock.NewFakeClock(time.Now())
	c := New(nil, nil, cloudmetrics.Decorate(p), plan.New(plan.Options{}), nil, nil, clk, nil, Options{})

	before := map[string]float64{}
	for _, k := range []string{KindNodeGroup, KindControlPlane, KindUnchecked} {
		before[k] = refusedCount(t, k)
	}
	groups, err := c.spotGroups(context.Background(), clk.Now())
	if err != nil || len(groups) != 1 {
		t.Fatalf("spot groups %v, %v; want the one group", groups, err)
	}
	p.found, p.err = nil, errors.New("apiserver down")
	if _, err := c.spotGroups(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{KindNodeGroup: 0, KindControlPlane: 1, KindUnchecked: 1} {
		if got := refusedCount(t, k) - before[k]; got != want {
			t.Errorf("refused{kind=%s} grew by %v, want %v", k, got, want)
		}
	}
}

func TestRefusedKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&cloud.ControlPlaneError{Kind: "node group", Name: "g"}, KindNodeGroup},
		{&cloud.ControlPlaneError{Kind: cloud.KindControlPlane, Name: "c"}, KindControlPlane},
		{errors.New("throttled"), KindUnchecked},
	} {
		if got := refusedKind(tc.err); got != tc.want {
			t.Errorf("refusedKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// refusedCount reads spotter_migrator_refused_node_groups_total{kind}.
func refusedCount(t *testing.T, kind string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := refusedGroups.WithLabelValues(kind).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A node group the provider left out is reported: a Warning Event on the
// leader Lease once (not at every run), the gauge while it is left out,
// and the gauge's series gone once it is back.
func TestLeftOutGroupsReported(t *testing.T) {
	self := &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: "spotter-system", Name: "spotter"}
	c, _, clk, rec := spotControllerEvents(Options{Self: self})
	p := c.provider.(*fake.Provider)
	p.SetLeftOut(cloud.LeftOut{Group: "legacy", Err: errors.New("the Auto Scaling group legacy uses launch configuration lc")})
	ctx := context.Background()
	for range 2 {
		if _, err := c.spotGroups(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	wantEvent(t, rec, ReasonNodeGroupLeftOut)
	if v := testutil.ToFloat64(leftOutGroups.WithLabelValues("legacy")); v != 1 {
		t.Errorf("spotter_migrator_node_group_left_out{node_group=legacy} = %v, want 1", v)
	}
	p.SetLeftOut()
	if _, err := c.spotGroups(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(leftOutGroups); n != 0 {
		t.Errorf("%d series of spotter_migrator_node_group_left_out once the group is back, want 0", n)
	}
	wantEvent(t, rec)
}
