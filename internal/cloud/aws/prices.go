package aws

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// onDemandTable is the shipped table of on-demand Linux list prices; its
// header names the sources and their dates.
//
//go:embed ondemand_prices.txt
var onDemandTable string

// prices is the parsed table.
type prices struct {
	// byType is region -> instance type -> price, the rows as listed.
	byType map[string]map[string]float64
	// families is region -> family -> the listed size with the most vCPUs
	// (metal sizes aside), from which other sizes of the family are priced.
	families map[string]map[string]sizedPrice
	// sizes is the sizes each family has, as us-east-1 lists them: a size
	// no region lists is never priced.
	sizes map[string]map[string]bool
}

type sizedPrice struct {
	units float64 // sizeUnits of the size
	price float64
}

var shipped = sync.OnceValue(func() *prices {
	p, err := parsePrices(onDemandTable)
	if err != nil {
		panic(err) // embedded at build time; TestShippedPricesParse keeps it valid
	}
	return p
})

// parsePrices reads "<region> <instance type> <price>" lines; # starts a
// comment.
func parsePrices(data string) (*prices, error) {
	p := &prices{byType: map[string]map[string]float64{}, families: map[string]map[string]sizedPrice{}, sizes: map[string]map[string]bool{}}
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("on-demand prices, line %d: %q is not <region> <instance type> <price>", i+1, line)
		}
		region, typ := f[0], f[1]
		price, err := strconv.ParseFloat(f[2], 64)
		if err != nil || price <= 0 {
			return nil, fmt.Errorf("on-demand prices, line %d: price %q is not a number > 0", i+1, f[2])
		}
		if p.byType[region] == nil {
			p.byType[region] = map[string]float64{}
			p.families[region] = map[string]sizedPrice{}
		}
		if _, dup := p.byType[region][typ]; dup {
			return nil, fmt.Errorf("on-demand prices, line %d: %s %s listed twice", i+1, region, typ)
		}
		p.byType[region][typ] = price
		family, size, ok := strings.Cut(typ, ".")
		if !ok {
			continue
		}
		if region == "us-east-1" {
			if p.sizes[family] == nil {
				p.sizes[family] = map[string]bool{}
			}
			p.sizes[family][size] = true
		}
		if u, ok := sizeUnits(size); ok && u > p.families[region][family].units {
			p.families[region][family] = sizedPrice{units: u, price: price}
		}
	}
	return p, nil
}

// sizeUnits is how many "large" an instance size is: nano 1/16, micro 1/8,
// small 1/4, medium 1/2, large 1, xlarge 2, <n>xlarge 2n. Within a family of
// current generation, AWS prices sizes in this proportion (vCPUs, and for the
// burstable t families memory, double at each step). Metal and other sizes
// have no fixed proportion.
func sizeUnits(size string) (float64, bool) {
	switch size {
	case "nano":
		return 1.0 / 16, true
	case "micro":
		return 1.0 / 8, true
	case "small":
		return 1.0 / 4, true
	case "medium":
		return 1.0 / 2, true
	case "large":
		return 1, true
	case "xlarge":
		return 2, true
	}
	n, ok := strings.CutSuffix(size, "xlarge")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(n)
	if err != nil || v <= 0 {
		return 0, false
	}
	return float64(2 * v), true
}

// onDemand returns the price of typ in region: as listed, else priced from
// the largest listed size of its family in the region, for a size the
// family has.
func (p *prices) onDemand(region, typ string) (float64, bool) {
	if v, ok := p.byType[region][typ]; ok {
		return v, true
	}
	family, size, ok := strings.Cut(typ, ".")
	if !ok || !p.sizes[family][size] {
		return 0, false
	}
	base, ok := p.families[region][family]
	units, sized := sizeUnits(size)
	if !ok || !sized {
		return 0, false
	}
	// Rounded to the 1/10,000 of a dollar AWS lists most prices in.
	v := base.price * units / base.units
	return float64(int64(v*10000+0.5)) / 10000, true
}

// OnDemandListPrice returns the on-demand Linux list price (USD per hour) that
// Spotter ships for an instance type in a region, and whether it has one. The
// configuration's pricing.instanceTypes overrides it (Provider does that).
func OnDemandListPrice(region, instanceType string) (float64, bool) {
	return shipped().onDemand(region, instanceType)
}
