package aws

import (
	"context"
	"math"
	"strings"
	"testing"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// A few list prices, as the sources list them (listed) or priced from a
// larger size of the family (derived).
func TestShippedPrices(t *testing.T) {
	for _, tc := range []struct {
		region, typ string
		want        float64 // 0: none
	}{
		{"us-east-1", "m5.xlarge", 0.192},
		{"us-east-1", "t3.medium", 0.0416},
		{"us-east-1", "c7g.xlarge", 0.145},
		{"us-east-1", "r7i.2xlarge", 0.5292},
		{"eu-west-1", "m5.large", 0.107},              // listed
		{"eu-west-1", "m5.xlarge", 0.214},             // derived from m5.8xlarge 1.712
		{"eu-west-1", "c6i.large", 0.0912},            // listed: not c5's 0.096
		{"eu-west-1", "c6g.xlarge", 0.1459},           // listed
		{"eu-central-1", "c6i.xlarge", 0.194},         // derived from c6i.32xlarge 6.208
		{"us-east-2", "c7g.xlarge", 0.1445},           // listed: us-east-2 is not always us-east-1
		{"ap-northeast-1", "c7g.2xlarge", 0.3638},     // derived from c7g.xlarge 0.1819
		{"ap-southeast-1", "m6g.medium", 0.048},       // listed
		{"ap-southeast-1", "m6g.2xlarge", 0.384},      // derived from m6g.8xlarge 1.536
		{"ap-northeast-1", "c7i.metal-48xl", 10.7856}, // listed
		{"eu-west-1", "c7i.metal-24xl", 4.59648},      // listed
		{"eu-west-1", "r5.large", 0},                  // no row of the family there
		{"eu-west-1", "m5.huge", 0},                   // no such size
		{"eu-west-1", "m5.10xlarge", 0},               // a size m5 does not have
		{"eu-west-1", "c6i.metal", 0},                 // metal is never derived
		{"xx-nowhere-1", "m5.large", 0},
		{"", "m5.large", 0},
	} {
		got, ok := OnDemandListPrice(tc.region, tc.typ)
		if ok != (tc.want > 0) || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s %s: %v %t, want %v", tc.region, tc.typ, got, ok, tc.want)
		}
	}
}

// The rule that prices a size from a larger one reproduces every us-east-1
// list price of the families other regions list, and every size another region
// lists from the largest one it lists, to within AWS's rounding.
func TestDerivedPricesMatchListed(t *testing.T) {
	p := shipped()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.0001+0.001*b }
	for region, families := range p.families {
		if region == "us-east-1" {
			continue // every size listed: nothing is derived there
		}
		for family := range families {
			for _, r := range []string{"us-east-1", region} {
				base := p.families[r][family]
				for typ, listed := range p.byType[r] {
					f, size, _ := strings.Cut(typ, ".")
					units, ok := sizeUnits(size)
					if f != family || !ok {
						continue
					}
					if derived := base.price * units / base.units; !near(derived, listed) {
						t.Errorf("%s %s: listed %v, priced from the largest listed size %v", r, typ, listed, derived)
					}
				}
			}
		}
	}
	if len(p.byType["us-east-1"]) < 1000 || len(p.byType) != 7 {
		t.Errorf("%d us-east-1 types, %d regions: the table lost rows", len(p.byType["us-east-1"]), len(p.byType))
	}
}

func TestParsePricesRefusesBadRows(t *testing.T) {
	for _, data := range []string{"us-east-1 m5.large", "us-east-1 m5.large -1", "us-east-1 m5.large x",
		"us-east-1 m5.large 0.096\nus-east-1 m5.large 0.096"} {
		if _, err := parsePrices(data); err == nil {
			t.Errorf("%q: no error", data)
		}
	}
}

// Through the provider and the SDK: on-demand instances and groups get the
// shipped price of the configured region, and the configuration's prices win.
func TestOnDemandPricesShippedAndOverridden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pricing map[string]v1alpha1.InstancePrice
		want    float64
	}{
		{"shipped table", map[string]v1alpha1.InstancePrice{"m5.xlarge": {Spot: 0.07}}, 0.192},
		{"configuration wins", map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.25, Spot: 0.07}}, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLabPricing(t, v1alpha1.AWSConfig{ClusterName: "prod"}, v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: tc.pricing})
			l.groups(t)
			ctx := context.Background()
			od, err := l.p.group(ctx, "od")
			if err != nil {
				t.Fatal(err)
			}
			if price, ok := od.PricePerHour(); !ok || price != tc.want {
				t.Errorf("on-demand group price %v %t, want %v", price, ok, tc.want)
			}
			insts, err := l.p.Instances(ctx, l.nodes(t))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, inst := range insts {
				if !inst.Spot && inst.InstanceType == "m5.xlarge" {
					n++
					if !inst.PriceKnown || inst.PricePerHour != tc.want {
						t.Errorf("instance %s: price %v %t, want %v", inst.ID, inst.PricePerHour, inst.PriceKnown, tc.want)
					}
				}
			}
			if n == 0 {
				t.Error("no on-demand m5.xlarge instance to check")
			}
		})
	}
}
