package strategy

import (
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// WithScenarioPrices returns cfg with the scenario's list prices as its
// pricing section, when cfg names no instance type's price: what an operator
// writes there for the planner (consolidations need the price of the node
// they empty). A configuration with prices of its own is used as it is, and
// cfg itself is never changed.
func WithScenarioPrices(cfg *v1alpha1.SpotterConfiguration, sc *scenario.Scenario) *v1alpha1.SpotterConfiguration {
	if len(cfg.Pricing.InstanceTypes) > 0 {
		return cfg
	}
	out := *cfg
	out.Pricing = v1alpha1.PricingConfig{Currency: sc.Currency, InstanceTypes: map[string]v1alpha1.InstancePrice{}}
	for _, g := range sc.NodeGroups {
		p := out.Pricing.InstanceTypes[g.InstanceType]
		if g.CapacityType == scenario.Spot {
			p.Spot = g.PricePerHour
		} else {
			p.OnDemand = g.PricePerHour
		}
		out.Pricing.InstanceTypes[g.InstanceType] = p
	}
	return &out
}
