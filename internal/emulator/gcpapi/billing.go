package gcpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The Cloud Billing Catalog API (cloudbilling.googleapis.com, v1), as far as
// a price reader calls it: services.skus.list of one service,
// GET /v1/services/<service>/skus with pageSize (at most and by default
// 5,000), pageToken and currencyCode, answering {"skus": [...],
// "nextPageToken": "..."} with each SKU's category (resourceFamily,
// resourceGroup, usageType), serviceRegions and current pricingInfo (one
// tiered rate from 0, unitPrice as units and nanos), enums as numbers when
// the client asks for $alt=json;enum-encoding=int (the Go client does) and
// as names otherwise. It shares the Compute Engine emulator's address, call
// counter ("cloudbilling.services.skus.list"), throttling and FailNext.
//
// Not emulated: services.list, startTime and endTime (refused with 400),
// tiers beyond the first, aggregation info, and any service but Compute
// Engine's (an empty list, as for a service without public SKUs).

// ComputeEngineService is the Cloud Billing Catalog's ID of Compute Engine.
const ComputeEngineService = "6F81-5844-456A"

// BillingMethod is the method ID the emulator counts SKU lists under.
const BillingMethod = "cloudbilling.services.skus.list"

// maxSKUPage is the most SKUs a page holds, and its default.
const maxSKUPage = 5000

// SKU is one SKU of the Compute Engine service as the emulator serves it.
type SKU struct {
	// ID is the SKU's ID ("CF4E-A0C7-E3BF"); empty: one is made up.
	ID string
	// Description is the catalog's description ("N2 Instance Core running
	// in Americas"), which is what names a machine family.
	Description string
	// ResourceFamily is "Compute", "Storage", "Network", ...
	ResourceFamily string
	// ResourceGroup is "CPU", "RAM", "N1Standard", "F1Micro", "GPU", ...
	ResourceGroup string
	// UsageType is "OnDemand", "Preemptible", "Commit1Yr", ...
	UsageType string
	// Regions are the SKU's service regions.
	Regions []string
	// UsageUnit is "h" (per hour), "GiBy.h" (per GiB and hour), "GiBy.mo",
	// ...
	UsageUnit string
	// USD is the price per usage unit in US dollars.
	USD float64
}

// billingCatalog is the emulator's SKU catalog (a field of Server).
type billingCatalog struct {
	mu    sync.Mutex
	skus  []SKU // nil until set: DefaultSKUs()
	set   bool
	rates map[string]float64 // currency -> units per USD
}

// SetSKUs replaces the catalog of Compute Engine SKUs (nil: none).
func (s *Server) SetSKUs(skus []SKU) {
	s.billing.mu.Lock()
	defer s.billing.mu.Unlock()
	s.billing.skus, s.billing.set = slices.Clone(skus), true
}

// SKUs returns the catalog served.
func (s *Server) SKUs() []SKU {
	s.billing.mu.Lock()
	defer s.billing.mu.Unlock()
	return slices.Clone(s.catalogLocked())
}

// SetCurrencyRate makes currencyCode served, at rate units of it per US
// dollar (the catalog's currencyConversionRate). Only USD is served by
// default; another currency is refused with 400, as the API refuses an
// unknown code.
func (s *Server) SetCurrencyRate(currencyCode string, rate float64) {
	s.billing.mu.Lock()
	defer s.billing.mu.Unlock()
	if s.billing.rates == nil {
		s.billing.rates = map[string]float64{}
	}
	s.billing.rates[currencyCode] = rate
}

func (s *Server) catalogLocked() []SKU {
	if !s.billing.set {
		s.billing.skus, s.billing.set = DefaultSKUs(), true
	}
	return s.billing.skus
}

// serveBilling answers a Cloud Billing Catalog request.
func (s *Server) serveBilling(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/services/")
	service, tail, _ := strings.Cut(rest, "/")
	if r.Method != http.MethodGet || tail != "skus" || service == "" {
		writeError(w, &APIError{http.StatusNotFound, "notFound", fmt.Sprintf("%s %s is not emulated.", r.Method, r.URL.Path)}, 0)
		return
	}
	s.mu.Lock()
	apiErr, retryAfter := s.admit(BillingMethod)
	s.mu.Unlock()
	if apiErr != nil {
		writeError(w, apiErr, retryAfter)
		return
	}
	body, apiErr := s.listSKUs(service, r)
	if apiErr != nil {
		writeError(w, apiErr, 0)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) listSKUs(service string, r *http.Request) (any, *APIError) {
	q := r.URL.Query()
	for _, p := range []string{"startTime", "endTime"} {
		if q.Get(p) != "" {
			return nil, invalid("%s is not emulated", p)
		}
	}
	size := maxSKUPage
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, invalid("Invalid value for field 'pageSize': '%s'.", v)
		}
		if n > 0 && n < maxSKUPage {
			size = n
		}
	}
	offset := 0
	if t := q.Get("pageToken"); t != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "skus-"))
		if err != nil || n < 0 || !strings.HasPrefix(t, "skus-") {
			return nil, invalid("Invalid value for field 'pageToken': '%s'.", t)
		}
		offset = n
	}
	currency, rate := "USD", 1.0
	s.billing.mu.Lock()
	if c := q.Get("currencyCode"); c != "" && c != "USD" {
		r, ok := s.billing.rates[c]
		if !ok {
			s.billing.mu.Unlock()
			return nil, invalid("Invalid value for field 'currency_code': '%s'. Currency code not supported.", c)
		}
		currency, rate = c, r
	}
	var all []SKU
	if service == ComputeEngineService {
		all = s.catalogLocked()
	}
	page := slices.Clone(all[min(offset, len(all)):min(offset+size, len(all))])
	s.billing.mu.Unlock()

	ints := strings.Contains(q.Get("$alt"), "enum-encoding=int")
	out := wireSKUList{Skus: []wireSKU{}}
	if offset+size < len(all) {
		out.NextPageToken = "skus-" + strconv.Itoa(offset+size)
	}
	for i, k := range page {
		out.Skus = append(out.Skus, skuJSON(service, k, offset+i, currency, rate, ints))
	}
	return out, nil
}

type wireSKUList struct {
	Skus          []wireSKU `json:"skus"`
	NextPageToken string    `json:"nextPageToken,omitempty"`
}

type wireSKU struct {
	Name                string          `json:"name"`
	SkuID               string          `json:"skuId"`
	Description         string          `json:"description"`
	Category            wireSKUCategory `json:"category"`
	ServiceRegions      []string        `json:"serviceRegions"`
	PricingInfo         []wirePricing   `json:"pricingInfo"`
	ServiceProviderName string          `json:"serviceProviderName"`
	GeoTaxonomy         wireGeoTaxonomy `json:"geoTaxonomy"`
}

type wireSKUCategory struct {
	ServiceDisplayName string `json:"serviceDisplayName"`
	ResourceFamily     string `json:"resourceFamily"`
	ResourceGroup      string `json:"resourceGroup"`
	UsageType          string `json:"usageType"`
}

type wirePricing struct {
	Summary                string         `json:"summary"`
	PricingExpression      wireExpression `json:"pricingExpression"`
	CurrencyConversionRate float64        `json:"currencyConversionRate"`
	EffectiveTime          string         `json:"effectiveTime"`
}

type wireExpression struct {
	UsageUnit                string     `json:"usageUnit"`
	UsageUnitDescription     string     `json:"usageUnitDescription"`
	BaseUnit                 string     `json:"baseUnit"`
	BaseUnitDescription      string     `json:"baseUnitDescription"`
	BaseUnitConversionFactor float64    `json:"baseUnitConversionFactor"`
	DisplayQuantity          float64    `json:"displayQuantity"`
	TieredRates              []wireRate `json:"tieredRates"`
}

type wireRate struct {
	StartUsageAmount float64   `json:"startUsageAmount"`
	UnitPrice        wireMoney `json:"unitPrice"`
}

type wireMoney struct {
	CurrencyCode string `json:"currencyCode"`
	Units        string `json:"units"`
	Nanos        int32  `json:"nanos"`
}

type wireGeoTaxonomy struct {
	Type    any      `json:"type"`
	Regions []string `json:"regions"`
}

func skuJSON(service string, k SKU, index int, currency string, rate float64, ints bool) wireSKU {
	id := k.ID
	if id == "" {
		id = fmt.Sprintf("%04X-%04X-%04X", 0x1000+index%0xE000, (index*7919)%0x10000, (index*104729)%0x10000)
	}
	price := k.USD * rate
	units := math.Floor(price)
	nanos := int32(math.Round((price - units) * 1e9))
	if nanos >= 1e9 {
		units, nanos = units+1, 0
	}
	unitDesc, baseUnit, baseDesc, factor := "hour", "s", "second", 3600.0
	switch k.UsageUnit {
	case "GiBy.h":
		unitDesc, baseUnit, baseDesc, factor = "gibibyte hour", "By.s", "byte second", 3600*(1<<30)
	case "GiBy.mo":
		unitDesc, baseUnit, baseDesc, factor = "gibibyte month", "By.s", "byte second", 2.6784e6*(1<<30)
	case "GiBy":
		unitDesc, baseUnit, baseDesc, factor = "gibibyte", "By", "byte", 1<<30
	}
	var geo any = "REGIONAL"
	if ints {
		geo = 2
	}
	if len(k.Regions) > 1 {
		geo = "MULTI_REGIONAL"
		if ints {
			geo = 3
		}
	}
	return wireSKU{
		Name: "services/" + service + "/skus/" + id, SkuID: id, Description: k.Description,
		Category:       wireSKUCategory{ServiceDisplayName: "Compute Engine", ResourceFamily: k.ResourceFamily, ResourceGroup: k.ResourceGroup, UsageType: k.UsageType},
		ServiceRegions: slices.Clone(k.Regions),
		PricingInfo: []wirePricing{{
			PricingExpression: wireExpression{UsageUnit: k.UsageUnit, UsageUnitDescription: unitDesc, BaseUnit: baseUnit, BaseUnitDescription: baseDesc,
				BaseUnitConversionFactor: factor, DisplayQuantity: 1,
				TieredRates: []wireRate{{UnitPrice: wireMoney{CurrencyCode: currency, Units: strconv.FormatFloat(units, 'f', 0, 64), Nanos: nanos}}}},
			CurrencyConversionRate: rate, EffectiveTime: "2030-01-01T08:00:00.000Z",
		}},
		ServiceProviderName: "Google",
		GeoTaxonomy:         wireGeoTaxonomy{Type: geo, Regions: slices.Clone(k.Regions)},
	}
}

// machineFamilyPrices are per-vCPU and per-GiB on-demand and spot prices of
// machine families in us-central1, in USD an hour: of the size and shape of
// Compute Engine's list prices, not a copy of today's (which the catalog
// itself is for).
var machineFamilyPrices = []struct {
	desc, group                  string // description before "Core"/"Ram"; resource group of predefined-type SKUs ("" for CPU/RAM)
	core, ram, spotCore, spotRAM float64
}{
	{"E2 Instance", "", 0.021811, 0.002923, 0.006543, 0.000877},
	{"N2 Instance", "", 0.031611, 0.004237, 0.007636, 0.001023},
	{"N2 Custom Instance", "", 0.033191, 0.004449, 0.008016, 0.001074},
	{"N2D AMD Instance", "", 0.027502, 0.003686, 0.006186, 0.000829},
	{"T2D AMD Instance", "", 0.027502, 0.003686, 0.006186, 0.000829},
	{"C3 Instance", "", 0.034650, 0.003938, 0.008050, 0.001090},
	{"N1 Predefined Instance", "N1Standard", 0.031611, 0.004237, 0.006655, 0.000892},
	{"Compute optimized", "", 0.033982, 0.004555, 0.008150, 0.001090},
}

// regionPrices are the emulated regions, their description's place and
// their price relative to us-central1.
var regionPrices = []struct {
	region, place string
	factor        float64
}{
	{"us-central1", "Americas", 1},
	{"us-east1", "Americas", 1},
	{"europe-west1", "EMEA", 1.1},
}

// DefaultSKUs is a small catalog of the shape of Compute Engine's: per-vCPU
// ("Core", resource group CPU, per hour) and per-GiB ("Ram", resource group
// RAM, per GiB and hour) SKUs of the machine families E2, N2 (and its custom
// types), N2D, T2D, C3, N1 (predefined) and C2 ("Compute optimized"),
// on-demand ("OnDemand") and spot ("Preemptible", described "Spot
// Preemptible ..."), in us-central1, us-east1 and europe-west1; the f1-micro
// and g1-small instance SKUs; and SKUs a machine price must not be taken
// from: commitments, sole tenancy, GPUs, licences, disks and egress.
func DefaultSKUs() []SKU {
	var out []SKU
	for _, r := range regionPrices {
		regions := []string{r.region}
		round := func(v float64) float64 { return math.Round(v*r.factor*1e6) / 1e6 }
		for _, f := range machineFamilyPrices {
			cpu, ram := f.group, f.group
			if cpu == "" {
				cpu, ram = "CPU", "RAM"
			}
			for _, u := range []struct {
				usage, prefix string
				core, ram     float64
			}{{"OnDemand", "", f.core, f.ram}, {"Preemptible", "Spot Preemptible ", f.spotCore, f.spotRAM}} {
				out = append(out,
					SKU{Description: u.prefix + f.desc + " Core running in " + r.place, ResourceFamily: "Compute", ResourceGroup: cpu,
						UsageType: u.usage, Regions: regions, UsageUnit: "h", USD: round(u.core)},
					SKU{Description: u.prefix + f.desc + " Ram running in " + r.place, ResourceFamily: "Compute", ResourceGroup: ram,
						UsageType: u.usage, Regions: regions, UsageUnit: "GiBy.h", USD: round(u.ram)})
			}
		}
		out = append(out,
			SKU{Description: "Micro Instance with burstable CPU running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "F1Micro",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "h", USD: round(0.0076)},
			SKU{Description: "Spot Preemptible Micro Instance with burstable CPU running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "F1Micro",
				UsageType: "Preemptible", Regions: regions, UsageUnit: "h", USD: round(0.0035)},
			SKU{Description: "Small Instance with 1 VCPU running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "G1Small",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "h", USD: round(0.0257)},
			SKU{Description: "Spot Preemptible Small Instance with 1 VCPU running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "G1Small",
				UsageType: "Preemptible", Regions: regions, UsageUnit: "h", USD: round(0.007)},
			SKU{Description: "Commitment v1: E2 Cpu in " + r.place + " for 1 Year", ResourceFamily: "Compute", ResourceGroup: "CPU",
				UsageType: "Commit1Yr", Regions: regions, UsageUnit: "h", USD: round(0.013741)},
			SKU{Description: "Commitment v1: N2 Ram in " + r.place + " for 3 Year", ResourceFamily: "Compute", ResourceGroup: "RAM",
				UsageType: "Commit3Yr", Regions: regions, UsageUnit: "GiBy.h", USD: round(0.001907)},
			SKU{Description: "N2 Sole Tenancy Instance Core running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "CPU",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "h", USD: round(0.037932)},
			SKU{Description: "N2 Custom Extended Instance Ram running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "RAM",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "GiBy.h", USD: round(0.009550)},
			SKU{Description: "Nvidia Tesla T4 GPU running in " + r.place, ResourceFamily: "Compute", ResourceGroup: "GPU",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "h", USD: round(0.35)},
			SKU{Description: "Licensing Fee for Windows Server 2019 Datacenter Edition (CPU cost)", ResourceFamily: "License", ResourceGroup: "PremiumImage",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "h", USD: 0.046},
			SKU{Description: "Storage PD Capacity in " + r.place, ResourceFamily: "Storage", ResourceGroup: "PDStandard",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "GiBy.mo", USD: round(0.04)},
			SKU{Description: "Network Internet Egress from " + r.place + " to Americas", ResourceFamily: "Network", ResourceGroup: "PremiumInternetEgress",
				UsageType: "OnDemand", Regions: regions, UsageUnit: "GiBy", USD: 0.12},
		)
	}
	return out
}

// FillerSKUs returns n SKUs that price no machine (disks, egress and
// licences in made-up regions), to give a catalog the size of Compute
// Engine's for benchmarks.
func FillerSKUs(n int) []SKU {
	out := make([]SKU, 0, n)
	for i := range n {
		region := fmt.Sprintf("filler%d-region%d", i%7, i/7%40)
		switch i % 3 {
		case 0:
			out = append(out, SKU{Description: fmt.Sprintf("Storage PD Snapshot %d in %s", i, region), ResourceFamily: "Storage", ResourceGroup: "PDSnapshot",
				UsageType: "OnDemand", Regions: []string{region}, UsageUnit: "GiBy.mo", USD: 0.026})
		case 1:
			out = append(out, SKU{Description: fmt.Sprintf("Network Inter Zone Egress %d in %s", i, region), ResourceFamily: "Network", ResourceGroup: "InterzoneEgress",
				UsageType: "OnDemand", Regions: []string{region}, UsageUnit: "GiBy", USD: 0.01})
		default:
			out = append(out, SKU{Description: fmt.Sprintf("Commitment v1: N2 Cpu in %s for 1 Year (%d)", region, i), ResourceFamily: "Compute", ResourceGroup: "CPU",
				UsageType: "Commit1Yr", Regions: []string{region}, UsageUnit: "h", USD: 0.019915})
		}
	}
	return out
}
