package migrator

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/plan"
)

// pricedProvider is a fake provider whose cloud has prices: RefreshPrices
// sets the groups' prices from the cloud's list.
type pricedProvider struct {
	*fake.Provider
	groups  map[string]*fake.NodeGroup
	cloud   map[string]float64 // group -> price the cloud has now
	asked   [][]string
	failing bool
}

func (p *pricedProvider) RefreshPrices(_ context.Context, types []string) error {
	p.asked = append(p.asked, types)
	if p.failing {
		return errors.New("throttled")
	}
	for id, price := range p.cloud {
		p.groups[id].SetPrice(price)
	}
	return nil
}

func (p *pricedProvider) InstanceTypePrice(string, string, string, bool) (float64, bool) {
	return 0, false
}

// Spot groups are ordered by the prices the cloud has when the provider
// reads prices: the migrator asks it to refresh them, with the groups'
// instance types, through the metrics decorator as in the controller; a
// failed refresh keeps the prices read before.
func TestSpotGroupsByCloudPrices(t *testing.T) {
	inner := fake.New("fake")
	p := &pricedProvider{Provider: inner, groups: map[string]*fake.NodeGroup{}, cloud: map[string]float64{"a": 0.30, "b": 0.05}}
	for id, price := range map[string]float64{"a": 0.10, "b": 0.20} {
		g := fake.NewNodeGroup(id, true, 0, 10)
		g.SetPrice(price)
		inner.AddNodeGroup(g)
		p.groups[id] = g
	}
	decorated := cloudmetrics.Decorate(p)
	if _, ok := decorated.(cloud.PriceReader); !ok {
		t.Fatal("the metrics decorator hides the provider's prices")
	}
	clk := testingclock.NewFakeClock(time.Now())
	c := New(nil, nil, decorated, plan.New(plan.Options{}), nil, nil, clk, nil, Options{})
	order := func() []string {
		groups, err := c.spotGroups(context.Background(), clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range groups {
			ids = append(ids, g.ID())
		}
		return ids
	}
	p.failing = true
	if got := order(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after a failed refresh: %v, want a, b (the prices before)", got)
	}
	p.failing = false
	if got := order(); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("after a refresh: %v, want b, a (the cloud's prices)", got)
	}
	if len(p.asked) != 2 || !slices.Equal(p.asked[1], []string{"fake.large"}) {
		t.Errorf("asked for %v, want the groups' instance type once per run", p.asked)
	}
}
