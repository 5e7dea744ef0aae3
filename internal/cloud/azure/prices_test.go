package azure

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/emulator/azureapi"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// retailPrice is the emulator's Linux price of a size in a region.
func retailPrice(t *testing.T, size, region string, spot bool) float64 {
	t.Helper()
	for _, it := range azureapi.DefaultRetailPrices() {
		if it.ArmSkuName == size && it.ArmRegionName == region && it.Type == "Consumption" && !strings.Contains(it.ProductName, "Windows") &&
			!strings.Contains(it.SkuName, "Low Priority") && strings.HasSuffix(it.SkuName, " Spot") == spot {
			return it.USD
		}
	}
	t.Fatalf("no retail price of %s in %s", size, region)
	return 0
}

// withRetail gives the lab's provider the Retail Prices client on the
// emulator (as FromConfig does with cloud.azure.endpoint), with short
// waits between retries.
func (l *lab) withRetail(t *testing.T) {
	t.Helper()
	c, err := NewRetailPrices(l.url, 4, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.p.WithRetailPrices(c)
}

// VM sizes without a configured price are priced from the Retail Prices
// API in the VM's location (Linux, on-demand or Spot), after a refresh;
// a configured price wins, and a retail spot price wins over maxPrice; a
// size the API does not list has no price. One query per region (and its
// pages), then nothing for PriceTTL.
func TestRetailPrices(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.withRetail(t)
	l.sets(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	if _, err := l.p.Instances(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	spotd := l.group(t, "aks-spotd-12345678-vmss")
	if p, ok := spotd.PricePerHour(); !ok || p != 0.05 {
		t.Errorf("before a refresh, the spot set without a configured price: %v %v, want its maxPrice 0.05", p, ok)
	}
	l.emu.SetRetailPageSize(2)
	l.emu.ResetCalls()
	sizes := []string{"Standard_D4s_v5", "Standard_B2s", "Standard_D8s_v5", "Standard_E4s_v5"}
	if err := l.p.RefreshPrices(ctx, sizes); err != nil {
		t.Fatal(err)
	}
	// westeurope only; Standard_D4s_v5 is configured, spot and on-demand:
	// not asked for; 12 Consumption items of the others (Linux, Windows,
	// Spot, Spot Windows, Low Priority; B2s has no spot), 2 a page.
	if n := l.emu.Calls(azureapi.RetailMethod); n != 6 {
		t.Errorf("%d retail price calls, want 6 (one query of 12 items in pages of 2)", n)
	}
	inst, err := l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range inst {
		want := 0.192 // Standard_D4s_v5, configured
		if i.InstanceType == "Standard_B2s" {
			want = retailPrice(t, "Standard_B2s", "westeurope", false)
		}
		if !i.PriceKnown || i.PricePerHour != want || i.Region != "westeurope" {
			t.Errorf("%s (%s in %q): %v %v, want %v", i.NodeName, i.InstanceType, i.Region, i.PricePerHour, i.PriceKnown, want)
		}
	}
	if p, ok := spotd.PricePerHour(); !ok || p != retailPrice(t, "Standard_D8s_v5", "westeurope", true) {
		t.Errorf("the spot set: %v %v, want the retail spot price", p, ok)
	}
	if p, ok := l.group(t, "aks-spot-12345678-vmss").PricePerHour(); !ok || p != 0.04 {
		t.Errorf("the configured spot price: %v %v, want 0.04", p, ok)
	}
	if p, ok := l.p.InstanceTypePrice("Standard_E4s_v5", "", "westeurope-2", true); !ok || p != retailPrice(t, "Standard_E4s_v5", "westeurope", true) {
		t.Errorf("InstanceTypePrice(Standard_E4s_v5, westeurope-2, spot) = %v %v", p, ok)
	}
	if _, ok := l.p.InstanceTypePrice("Standard_D4as_v5", "westeurope", "", false); ok {
		t.Error("a size not refreshed has a price")
	}

	// Within PriceTTL nothing is asked again, but a new size; after it,
	// everything once more. An unknown size is remembered as unpriced.
	l.emu.ResetCalls()
	if err := l.p.RefreshPrices(ctx, append(sizes, "Standard_Z99_v9")); err != nil || l.emu.Calls(azureapi.RetailMethod) != 1 {
		t.Errorf("a refresh with one new size: %v, %d calls, want 1", err, l.emu.Calls(azureapi.RetailMethod))
	}
	if _, ok := l.p.InstanceTypePrice("Standard_Z99_v9", "westeurope", "", false); ok {
		t.Error("a size the API does not list has a price")
	}
	if err := l.p.RefreshPrices(ctx, append(sizes, "Standard_Z99_v9")); err != nil || l.emu.Calls(azureapi.RetailMethod) != 1 {
		t.Errorf("a refresh within PriceTTL: %v, %d calls", err, l.emu.Calls(azureapi.RetailMethod))
	}
	l.emu.SetRetailPageSize(0)
	l.clock.Step(61 * time.Minute)
	if err := l.p.RefreshPrices(ctx, append(sizes, "Standard_Z99_v9")); err != nil || l.emu.Calls(azureapi.RetailMethod) != 2 {
		t.Errorf("a refresh after PriceTTL: %v, %d calls, want 2", err, l.emu.Calls(azureapi.RetailMethod))
	}
}

// Many sizes are asked 20 a query; a throttled page (429) is asked again
// by the pipeline, a lasting throttle is a *cloud.ThrottledError that
// leaves the prices read before; prices come in the configured currency.
func TestRetailPricesBatchingAndThrottling(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.withRetail(t)
	l.sets(t)
	ctx := context.Background()
	if _, err := l.p.NodeGroups(ctx); err != nil {
		t.Fatal(err)
	}
	l.emu.SetRetailPrices(append(azureapi.DefaultRetailPrices(), azureapi.FillerRetailPrices("westeurope", 30)...))
	var sizes []string
	for i := range 30 {
		sizes = append(sizes, fmt.Sprintf("Standard_X%d_v9", i))
	}
	l.emu.ResetCalls()
	l.emu.ThrottleNext(2)
	if err := l.p.RefreshPrices(ctx, sizes); err != nil {
		t.Fatal(err)
	}
	if n, th := l.emu.Calls(azureapi.RetailMethod), l.emu.Throttled(azureapi.RetailMethod); n != 4 || th != 2 {
		t.Errorf("%d calls, %d throttled; want 2 queries of 20 and 10 sizes and 2 retries", n, th)
	}
	if p, ok := l.p.InstanceTypePrice("Standard_X29_v9", "westeurope", "", false); !ok || math.Abs(p-0.3) > 1e-9 {
		t.Errorf("Standard_X29_v9: %v %v, want 0.3", p, ok)
	}

	l.clock.Step(2 * time.Hour)
	l.emu.ThrottleNext(20)
	if err := l.p.RefreshPrices(ctx, sizes); !cloud.IsThrottled(err) {
		t.Errorf("a lasting throttle: %v, want a *cloud.ThrottledError", err)
	}
	if p, ok := l.p.InstanceTypePrice("Standard_X29_v9", "westeurope", "", false); !ok || math.Abs(p-0.3) > 1e-9 {
		t.Errorf("after a failed refresh: %v %v, want the price read before", p, ok)
	}

	// Another currency: asked for, and what comes back is in it.
	eur := newLab(t, prodGroups, azureapi.Options{})
	eur.withRetail(t)
	eur.p.opts.Pricing = v1alpha1.PricingConfig{Currency: "EUR"}
	eur.sets(t)
	eur.emu.SetRetailCurrencyRate("EUR", 0.5)
	if _, err := eur.p.NodeGroups(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eur.p.RefreshPrices(ctx, []string{"Standard_B2s"}); err != nil {
		t.Fatal(err)
	}
	if p, ok := eur.p.InstanceTypePrice("Standard_B2s", "westeurope", "", false); !ok || math.Abs(p-retailPrice(t, "Standard_B2s", "westeurope", false)/2) > 1e-6 {
		t.Errorf("EUR: %v %v", p, ok)
	}
}

// Only Linux pay-as-you-go prices per hour in the currency asked count,
// whatever their order: the primary meter region's first, then the latest.
func TestLinuxPrice(t *testing.T) {
	item := func(sku, product string, price float64, mods ...func(*wireRetailItem)) wireRetailItem {
		it := wireRetailItem{CurrencyCode: "USD", RetailPrice: price, ArmSkuName: "Standard_D4s_v5", SkuName: sku, ProductName: product, Type: "Consumption",
			UnitOfMeasure: "1 Hour", EffectiveStartDate: "2029-01-01T00:00:00Z", IsPrimaryMeterRegion: true}
		for _, m := range mods {
			m(&it)
		}
		return it
	}
	later := func(it *wireRetailItem) { it.EffectiveStartDate = "2029-06-01T00:00:00Z" }
	items := []wireRetailItem{
		item("D4s v5", "Virtual Machines Dsv5 Series Windows", 0.9, later),
		item("D4s v5 Low Priority", "Virtual Machines Dsv5 Series", 0.01, later),
		item("D4s v5", "Virtual Machines Dsv5 Series", 0.8, func(it *wireRetailItem) { it.Type = "DevTestConsumption"; later(it) }),
		item("D4s v5", "Virtual Machines Dsv5 Series", 500, func(it *wireRetailItem) { it.UnitOfMeasure = "1/Month" }),
		item("D4s v5", "Virtual Machines Dsv5 Series", 0.15, func(it *wireRetailItem) { it.CurrencyCode = "EUR" }),
		item("D4s v5", "Virtual Machines Dsv5 Series", 0.20, func(it *wireRetailItem) { it.IsPrimaryMeterRegion = false; later(it) }),
		item("D4s v5", "Virtual Machines Dsv5 Series", 0.18),
		item("D4s v5", "Virtual Machines Dsv5 Series", 0.192, later),
		item("D4s v5 Spot", "Virtual Machines Dsv5 Series Windows", 0.09),
		item("D4s v5 Spot", "Virtual Machines Dsv5 Series", 0.04),
	}
	chosen, out := map[string]wireRetailItem{}, map[string]VMPrice{}
	for _, it := range items {
		linuxPrice(it, "USD", chosen, out)
	}
	if got := out["standard_d4s_v5"]; got != (VMPrice{OnDemand: 0.192, Spot: 0.04}) || len(out) != 1 {
		t.Errorf("prices %v, want on-demand 0.192 (the latest Linux consumption price of the primary region) and spot 0.04", out)
	}
}

// A price refresh over HTTP against the emulator: 30 VM sizes in 3
// regions (eastus, westeurope and one of 3,000 made-up sizes' prices),
// one query per region and 20 sizes, pages of 1,000.
//
//	go test ./internal/cloud/azure -run '^$' -bench PriceRefresh -benchtime 5x
func BenchmarkPriceRefresh(b *testing.B) {
	l := newLab(b, prodGroups, azureapi.Options{})
	c, err := NewRetailPrices(l.url, 4, 10*time.Millisecond, nil)
	if err != nil {
		b.Fatal(err)
	}
	l.p.WithRetailPrices(c)
	l.emu.SetRetailPrices(append(append(azureapi.DefaultRetailPrices(), azureapi.FillerRetailPrices("northeurope", 3000)...),
		azureapi.FillerRetailPrices("westeurope", 3000)...))
	for _, loc := range []string{"eastus", "westeurope", "northeurope"} {
		if err := l.emu.CreateScaleSet(azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: "aks-" + loc + "-vmss", Location: loc, SKU: "Standard_D4s_v5"}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := l.p.NodeGroups(ctx); err != nil {
		b.Fatal(err)
	}
	sizes := []string{"Standard_D2s_v5", "Standard_D8s_v5", "Standard_E4s_v5", "Standard_B2s"}
	for i := range 26 {
		sizes = append(sizes, fmt.Sprintf("Standard_X%d_v9", i*100))
	}
	l.emu.ResetCalls()
	for b.Loop() {
		l.clock.Step(2 * time.Hour) // every refresh asks again
		if err := l.p.RefreshPrices(ctx, sizes); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := l.p.InstanceTypePrice("Standard_X2500_v9", "westeurope", "", false); !ok {
		b.Fatal("no price")
	}
	b.ReportMetric(float64(l.emu.Calls(azureapi.RetailMethod))/float64(b.N), "retail-calls/op")
}

// Items come from the Retail Prices API: whatever they hold, recording
// them does not panic, and only positive prices are kept.
func FuzzLinuxPrice(f *testing.F) {
	f.Add("D4s v5 Spot", "Virtual Machines Dsv5 Series", "Consumption", "1 Hour", "Standard_D4s_v5", 0.04, true)
	f.Add("D4s v5", "Virtual Machines Dsv5 Series Windows", "Consumption", "1 Hour", "Standard_D4s_v5", 0.3, false)
	f.Add("", "", "", "", "", -1.0, false)
	f.Fuzz(func(t *testing.T, sku, product, typ, unit, arm string, price float64, primary bool) {
		chosen, out := map[string]wireRetailItem{}, map[string]VMPrice{}
		for range 2 {
			linuxPrice(wireRetailItem{CurrencyCode: "USD", RetailPrice: price, ArmSkuName: arm, SkuName: sku, ProductName: product, Type: typ,
				UnitOfMeasure: unit, IsPrimaryMeterRegion: primary}, "USD", chosen, out)
		}
		for k, p := range out {
			if p.OnDemand < 0 || p.Spot < 0 || (p.OnDemand == 0 && p.Spot == 0) || k != strings.ToLower(k) {
				t.Errorf("%q: %+v", k, p)
			}
		}
	})
}
