package gcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	billing "cloud.google.com/go/billing/apiv1"
	"cloud.google.com/go/billing/apiv1/billingpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud"
)

// Prices from the Cloud Billing Catalog API. Compute Engine bills a
// predefined machine type as its vCPUs times its family's per-vCPU price
// plus its memory (GiB) times the family's per-GiB price, each per region
// and per provisioning model (on-demand, or spot: the catalog's usage type
// "Preemptible"); the catalog lists those prices as SKUs of the Compute
// Engine service, one per family, resource (Core or Ram), region and usage
// type, named by their description ("N2 Instance Core running in
// Americas", "Spot Preemptible E2 Instance Ram running in EMEA"). The whole
// service is read with one paged services.skus.list (5,000 SKUs a page)
// and kept for PriceTTL.

// ComputeEngineService is the Cloud Billing Catalog's name of the Compute
// Engine service, whose SKUs price machine types.
const ComputeEngineService = "services/6F81-5844-456A"

// skuPageSize is the most SKUs the catalog returns a page.
const skuPageSize = 5000

// BillingAPI is the part of the Cloud Billing Catalog client
// (cloud.google.com/go/billing/apiv1) the provider uses.
type BillingAPI interface {
	ListSkus(context.Context, *billingpb.ListSkusRequest, ...gax.CallOption) *billing.SkuIterator
}

var _ BillingAPI = (*billing.CloudCatalogClient)(nil)

// rateKey names one rate of the catalog.
type rateKey struct {
	region string
	// family is a machine series as machine type names start ("e2",
	// "n2d", "c2"), or a shared-core type priced per instance
	// ("f1-micro", "g1-small").
	family string
	custom bool
	spot   bool
}

// rates are a family's prices in a region for one provisioning model.
type rates struct {
	core, ram, instance float64 // per vCPU hour, per GiB hour, per instance hour; 0: none
}

// priceTable is what a read of the catalog gave.
type priceTable struct {
	rates map[rateKey]rates
	at    time.Time
	skus  int // SKUs read
}

// skuResource is what a SKU prices.
type skuResource int

const (
	resCore skuResource = iota + 1
	resRAM
	resInstance
)

// familyWord matches a machine series as SKU descriptions spell it first
// (E2, N2D, T2A, C3D, M3).
var familyWord = regexp.MustCompile(`^[A-Z][A-Z0-9]*[0-9][A-Z]*$`)

// descriptionWords are the words a machine SKU's description may hold
// between its series and its resource; any other (Sole Tenancy, Extended,
// Upgrade Premium, ...) prices something else.
var descriptionWords = map[string]bool{"Instance": true, "AMD": true, "Arm": true, "Intel": true, "Predefined": true, "Custom": true, "Memory-optimized": true}

// parseDescription reads what a Compute SKU's description prices: the
// family, custom or predefined types, and the resource. ok is false for
// SKUs that price no machine type's vCPUs or memory.
func parseDescription(desc string) (family string, custom bool, res skuResource, ok bool) {
	desc = strings.TrimPrefix(strings.TrimPrefix(desc, "Spot "), "Preemptible ")
	head, _, found := strings.Cut(desc, " running in ")
	if !found {
		return "", false, 0, false
	}
	switch head {
	case "Micro Instance with burstable CPU":
		return "f1-micro", false, resInstance, true
	case "Small Instance with 1 VCPU":
		return "g1-small", false, resInstance, true
	}
	words := strings.Fields(head)
	if len(words) < 2 {
		return "", false, 0, false
	}
	switch words[len(words)-1] {
	case "Core":
		res = resCore
	case "Ram", "RAM":
		res = resRAM
	default:
		return "", false, 0, false
	}
	words = words[:len(words)-1]
	switch strings.Join(words, " ") {
	case "Compute optimized", "Compute optimized Instance":
		return "c2", false, res, true
	case "Memory-optimized Instance":
		return "m1", false, res, true
	case "Custom Instance":
		return "n1", true, res, true
	}
	if !familyWord.MatchString(words[0]) {
		return "", false, 0, false
	}
	instance := false
	for _, w := range words[1:] {
		if !descriptionWords[w] {
			return "", false, 0, false
		}
		custom = custom || w == "Custom"
		instance = instance || w == "Instance"
	}
	if !instance {
		return "", false, 0, false
	}
	return strings.ToLower(words[0]), custom, res, true
}

// skuRate reads a SKU: the rate keys it sets (one per service region), the
// resource and the price, in currency. ok is false for a SKU that prices
// no machine type.
func skuRate(sku *billingpb.Sku, currency string) (keys []rateKey, res skuResource, price float64, ok bool) {
	cat := sku.GetCategory()
	if cat.GetResourceFamily() != "Compute" {
		return nil, 0, 0, false
	}
	var spot bool
	switch cat.GetUsageType() {
	case "OnDemand":
	case "Preemptible":
		spot = true
	default:
		return nil, 0, 0, false
	}
	family, custom, res, ok := parseDescription(sku.GetDescription())
	if !ok || len(sku.GetPricingInfo()) == 0 {
		return nil, 0, 0, false
	}
	expr := sku.GetPricingInfo()[len(sku.GetPricingInfo())-1].GetPricingExpression()
	want := "h"
	if res == resRAM {
		want = "GiBy.h"
	}
	if expr.GetUsageUnit() != want {
		return nil, 0, 0, false
	}
	var first *billingpb.PricingExpression_TierRate
	for _, r := range expr.GetTieredRates() {
		if r.GetStartUsageAmount() == 0 {
			first = r
			break
		}
	}
	if first == nil || (currency != "" && first.GetUnitPrice().GetCurrencyCode() != currency) {
		return nil, 0, 0, false
	}
	price = float64(first.GetUnitPrice().GetUnits()) + float64(first.GetUnitPrice().GetNanos())/1e9
	if price <= 0 {
		return nil, 0, 0, false
	}
	for _, r := range sku.GetServiceRegions() {
		keys = append(keys, rateKey{region: r, family: family, custom: custom, spot: spot})
	}
	return keys, res, price, len(keys) > 0
}

// add records a SKU's rate; the first SKU of a key and resource wins.
func (t *priceTable) add(keys []rateKey, res skuResource, price float64) {
	for _, k := range keys {
		r := t.rates[k]
		switch {
		case res == resCore && r.core == 0:
			r.core = price
		case res == resRAM && r.ram == 0:
			r.ram = price
		case res == resInstance && r.instance == 0:
			r.instance = price
		}
		t.rates[k] = r
	}
}

// sharedCoreVCPUs are the vCPUs Compute Engine bills the E2 shared-core
// machine types for (a fraction of the 2 vCPUs they burst to).
var sharedCoreVCPUs = map[string]float64{"e2-micro": 0.25, "e2-small": 0.5, "e2-medium": 1}

// customType matches a custom machine type's name: [<series>-]custom-<vCPUs>-<MiB>[-ext].
var customType = regexp.MustCompile(`^(?:([a-z][a-z0-9]*)-)?custom-([0-9]+)-([0-9]+)(-ext)?$`)

// acceleratorFamily matches the accelerator-optimized series (a2, a3, g2,
// ...), whose GPUs are billed apart from vCPUs and memory: vCPUs and memory
// alone would understate their price, so they have none.
var acceleratorFamily = regexp.MustCompile(`^[ag][0-9]`)

// machinePrice is the hourly price of a machine type in region from the
// table, with its size (for predefined types). Extended-memory custom types,
// shared-core custom types, accelerator-optimized types and families the
// table lacks have none.
func (t *priceTable) machinePrice(region, machineType string, size machineFacts, sized, spot bool) (float64, bool) {
	if t == nil || region == "" {
		return 0, false
	}
	if r, ok := t.rates[rateKey{region: region, family: machineType, spot: spot}]; ok && r.instance > 0 {
		return r.instance, true
	}
	key := rateKey{region: region, family: machineType[:max(strings.Index(machineType, "-"), 0)], spot: spot}
	cpus, memGiB := float64(size.cpus), float64(size.memMB)/1024
	if m := customType.FindStringSubmatch(machineType); m != nil {
		if m[4] != "" {
			return 0, false
		}
		key.family, key.custom = m[1], true
		if key.family == "" {
			key.family = "n1"
		}
		c, _ := strconv.Atoi(m[2])
		mb, _ := strconv.Atoi(m[3])
		cpus, memGiB, sized = float64(c), float64(mb)/1024, true
	} else if v, ok := sharedCoreVCPUs[machineType]; ok {
		cpus = v
	}
	r, ok := t.rates[key]
	if !ok || !sized || key.family == "" || acceleratorFamily.MatchString(key.family) || r.core == 0 || r.ram == 0 {
		return 0, false
	}
	// Rounded to the millionth, below the catalog's own precision of a
	// machine's price.
	return math.Round((cpus*r.core+memGiB*r.ram)*1e6) / 1e6, true
}

// regionOf is the region of a zone (us-central1-a: us-central1).
func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return ""
}

// RefreshPrices implements cloud.PriceReader: the sizes of machineTypes not
// read yet (machineTypes.get, cached for good), and, when the prices are
// older than PriceTTL, the Compute Engine service's SKUs of the Cloud
// Billing Catalog in one paged list; not when the configuration prices
// every one of machineTypes, spot and on-demand. Without a catalog client
// it reads sizes only. A failed read of sizes does not stop the catalog's; both
// errors are returned.
func (p *Provider) RefreshPrices(ctx context.Context, machineTypes []string) error {
	sizeErr := p.learnSizes(ctx, machineTypes)
	if p.c.Billing == nil {
		return sizeErr
	}
	now := p.clock.Now()
	p.mu.Lock()
	fresh := p.prices != nil && now.Sub(p.prices.at) < p.opts.PriceTTL
	p.mu.Unlock()
	if fresh || !slices.ContainsFunc(machineTypes, p.unconfigured) {
		return sizeErr
	}
	t, err := p.readCatalog(ctx)
	if err != nil {
		return errors.Join(sizeErr, err)
	}
	t.at = now
	p.mu.Lock()
	p.prices = t
	p.mu.Unlock()
	return sizeErr
}

// learnSizes reads the size of each machine type not known yet (and not
// priced by the configuration, spot and on-demand), in the zone of an
// instance of that type, else of any instance or group known. A type
// Compute Engine does not know stays unpriced, and is asked about again
// after PriceTTL.
func (p *Provider) learnSizes(ctx context.Context, machineTypes []string) error {
	now := p.clock.Now()
	p.mu.Lock()
	zoneOf := map[string]string{}
	var anyZone string
	for _, f := range p.instances {
		if !f.gone {
			zoneOf[f.machineType] = f.key.zone
			anyZone = max(anyZone, f.key.zone)
		}
	}
	for _, g := range p.groups {
		if len(g.zones) > 0 && anyZone == "" {
			anyZone = g.zones[0]
		}
	}
	var missing []string
	for _, t := range machineTypes {
		_, known := p.machineTypes[t]
		unknownAt, unknown := p.unknownTypes[t]
		switch {
		case known, t == "", customType.MatchString(t), slices.Contains(missing, t),
			unknown && now.Sub(unknownAt) < p.opts.PriceTTL, !p.unconfigured(t):
			continue
		}
		missing = append(missing, t)
	}
	p.mu.Unlock()
	slices.Sort(missing)
	for _, t := range missing {
		zone := zoneOf[t]
		if zone == "" {
			zone = anyZone
		}
		if zone == "" {
			continue
		}
		_, err := p.machineType(ctx, zone, t)
		if cloud.IsNotFound(err) {
			p.mu.Lock()
			p.unknownTypes[t] = now
			p.mu.Unlock()
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readCatalog lists the Compute Engine SKUs, every page, in the pricing
// configuration's currency. A throttled page is asked again (catalogRetries
// times at most, after the cloud's Retry-After or a backoff from 1 s).
func (p *Provider) readCatalog(ctx context.Context) (*priceTable, error) {
	currency := p.opts.Pricing.Currency
	req := &billingpb.ListSkusRequest{Parent: ComputeEngineService, PageSize: skuPageSize}
	if currency != "" && currency != "USD" {
		req.CurrencyCode = currency
	}
	if currency == "" {
		currency = "USD"
	}
	retry := gax.WithRetry(func() gax.Retryer {
		return &throttleRetryer{b: backoff.Backoff{Initial: p.opts.CatalogRetryWait, Max: 30 * time.Second}, left: catalogRetries}
	})
	it := p.c.Billing.ListSkus(ctx, req, retry)
	t := &priceTable{rates: map[rateKey]rates{}}
	for {
		sku, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the Compute Engine SKUs of the Cloud Billing Catalog: %w", mapError("", err))
		}
		t.skus++
		if keys, res, price, ok := skuRate(sku, currency); ok {
			t.add(keys, res, price)
		}
	}
}

// unconfigured reports whether the configuration lacks a spot or an
// on-demand price of machineType.
func (p *Provider) unconfigured(machineType string) bool {
	conf := p.opts.Pricing.InstanceTypes[machineType]
	return conf.OnDemand <= 0 || conf.Spot <= 0
}

// catalogRetries is how many times a throttled catalog page is asked again.
const catalogRetries = 4

// throttleRetryer retries a throttled call (429, rateLimitExceeded) a few
// times: after Retry-After when the answer has one, else after a doubling
// wait. The catalog is read rarely and in one list, so a pause is better
// than starting the list over.
type throttleRetryer struct {
	b    backoff.Backoff
	left int
}

// Retry implements gax.Retryer.
func (r *throttleRetryer) Retry(err error) (time.Duration, bool) {
	te, ok := errors.AsType[*cloud.ThrottledError](mapError("", err))
	if !ok || r.left <= 0 {
		return 0, false
	}
	r.left--
	wait := r.b.Next()
	if te.RetryAfter > 0 {
		wait = min(te.RetryAfter, time.Minute)
	}
	return wait, true
}

// InstanceTypePrice implements cloud.PriceReader: the configured price of
// the machine type where pricing.instanceTypes gives it, else the
// catalog's for region (or the zone's region).
func (p *Provider) InstanceTypePrice(machineType, region, zone string, spot bool) (float64, bool) {
	if region == "" {
		region = regionOf(zone)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.priceLocked(machineType, region, spot)
}

// priceLocked is a machine type's hourly price in region: the configured
// one, else the catalog's (read by RefreshPrices), for a type whose size is
// known. p.mu is held.
func (p *Provider) priceLocked(machineType, region string, spot bool) (float64, bool) {
	conf, ok := p.opts.Pricing.InstanceTypes[machineType]
	switch {
	case spot && ok && conf.Spot > 0:
		return conf.Spot, true
	case !spot && ok && conf.OnDemand > 0:
		return conf.OnDemand, true
	}
	size, sized := p.machineTypes[machineType]
	return p.prices.machinePrice(region, machineType, size, sized, spot)
}
