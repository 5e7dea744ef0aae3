package azure

import (
	"context"
	"slices"
	"strings"
	"time"
)

// retailKey names a VM size's prices in a region (both lowercase).
type retailKey struct{ region, size string }

// retailEntry is what the Retail Prices API said of a size in a region,
// and when: a size it does not list is remembered too, so that it is not
// asked about again before PriceTTL.
type retailEntry struct {
	price VMPrice
	at    time.Time
}

// RefreshPrices implements cloud.PriceReader: the Linux pay-as-you-go
// prices (on-demand and Spot) of sizes from the Retail Prices API, in every
// region where a VM or scale set is known, for those read longer than
// PriceTTL ago and not priced by the configuration (spot and on-demand):
// one query (and its pages) per region and 20 sizes. Without a Retail
// Prices client it does nothing.
func (p *Provider) RefreshPrices(ctx context.Context, sizes []string) error {
	if p.retail == nil {
		return nil
	}
	now := p.clock.Now()
	p.mu.Lock()
	var regions []string
	add := func(r string) {
		if r = strings.ToLower(r); r != "" && !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
	}
	for _, f := range p.vms {
		if !f.gone {
			add(f.location)
		}
	}
	for _, s := range p.sets {
		add(s.location)
	}
	stale := map[string][]string{}
	for _, r := range regions {
		for _, s := range sizes {
			e, ok := p.retailPrices[retailKey{r, strings.ToLower(s)}]
			if conf := p.opts.Pricing.InstanceTypes[s]; conf.OnDemand > 0 && conf.Spot > 0 {
				continue
			}
			if s != "" && (!ok || now.Sub(e.at) >= p.opts.PriceTTL) && !slices.Contains(stale[r], s) {
				stale[r] = append(stale[r], s)
			}
		}
	}
	p.mu.Unlock()
	slices.Sort(regions)
	for _, r := range regions {
		if len(stale[r]) == 0 {
			continue
		}
		slices.Sort(stale[r])
		got, _, err := p.retail.VMPrices(ctx, r, stale[r], p.opts.Pricing.Currency)
		if err != nil {
			return err
		}
		p.mu.Lock()
		for _, s := range stale[r] {
			k := retailKey{r, strings.ToLower(s)}
			p.retailPrices[k] = retailEntry{price: got[k.size], at: now}
		}
		p.mu.Unlock()
	}
	return nil
}

// InstanceTypePrice implements cloud.PriceReader: a VM size's price in a
// region (the zone's, eastus-1: eastus, when region is empty), as
// priceLocked gives it, for a VM without billingProfile.maxPrice.
func (p *Provider) InstanceTypePrice(size, region, zone string, spot bool) (float64, bool) {
	if region == "" {
		if i := strings.LastIndex(zone, "-"); i > 0 {
			region = zone[:i]
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.priceLocked(size, region, spot, 0)
}

// priceLocked is a VM size's hourly price in region (a location): the
// configured one (pricing.instanceTypes) where given, else the Retail
// Prices API's as last read. A spot VM without either is priced at its
// maxPrice when that is set: what Azure charges at most (-1, up to the
// on-demand price, gives the on-demand price). p.mu is held.
func (p *Provider) priceLocked(size, region string, spot bool, maxPrice float64) (float64, bool) {
	conf, configured := p.opts.Pricing.InstanceTypes[size]
	retail := p.retailPrices[retailKey{strings.ToLower(region), strings.ToLower(size)}].price
	onDemand := conf.OnDemand
	if !configured || onDemand <= 0 {
		onDemand = retail.OnDemand
	}
	switch {
	case !spot:
		return onDemand, onDemand > 0
	case configured && conf.Spot > 0:
		return conf.Spot, true
	case retail.Spot > 0:
		return retail.Spot, true
	case maxPrice > 0:
		return maxPrice, true
	case maxPrice == -1 && onDemand > 0:
		return onDemand, true
	}
	return 0, false
}
