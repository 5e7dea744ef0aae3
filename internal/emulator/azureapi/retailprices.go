package azureapi

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Azure Retail Prices API (GET /api/retail/prices: public, no
// credential), as far as a price reader calls it, at the same address as
// the Resource Manager emulator: an OData $filter of comparisons
// (field eq 'value') joined by and and or, with parentheses, over the
// fields serviceName, serviceFamily, armRegionName, armSkuName, skuName,
// meterName, productName, priceType and location (values compared exactly,
// as API version 2023-01-01-preview does); currencyCode='<code>'; pages of
// RetailPageSize items, NextPageLink carrying $skip, and Count, in the
// envelope {"BillingCurrency", "CustomerEntityId", "CustomerEntityType",
// "Items", "NextPageLink", "Count"}. It shares the call counter
// ("retailprices.list") and throttling (429 with Retry-After) of the
// Resource Manager emulator, and FailNext.
//
// Not emulated: other OData operators and functions (contains, ne, gt, ...;
// refused with 400 as the API refuses what it cannot parse), $top,
// meterRegion, savings plans and reservation terms beyond a field.

// RetailMethod is the method the emulator counts retail price lists under.
const RetailMethod = "retailprices.list"

// RetailPageSize is the most items a page of retail prices holds (the API's
// 1,000).
const RetailPageSize = 1000

// RetailPrice is one item (a meter's price) of the Retail Prices API.
type RetailPrice struct {
	ArmSkuName    string // Standard_D4s_v5
	ArmRegionName string // eastus
	Location      string // US East
	ProductName   string // Virtual Machines Dsv5 Series [Windows]
	SkuName       string // D4s v5 [Spot|Low Priority]
	MeterName     string // as SkuName
	ServiceName   string // Virtual Machines
	ServiceFamily string // Compute
	// Type is Consumption, Reservation or DevTestConsumption.
	Type string
	// ReservationTerm is "1 Year" or "3 Years" for a reservation.
	ReservationTerm string
	UnitOfMeasure   string // 1 Hour
	// USD is the retail price per unit in US dollars.
	USD                  float64
	EffectiveStartDate   time.Time
	IsPrimaryMeterRegion bool
}

// retailCatalog is the emulator's retail prices (a field of Server).
type retailCatalog struct {
	mu       sync.Mutex
	items    []RetailPrice
	set      bool
	rates    map[string]float64
	pageSize int
}

// SetRetailPrices replaces the retail prices served (nil: none).
func (s *Server) SetRetailPrices(items []RetailPrice) {
	s.retail.mu.Lock()
	defer s.retail.mu.Unlock()
	s.retail.items, s.retail.set = slices.Clone(items), true
}

// RetailPrices returns the retail prices served.
func (s *Server) RetailPrices() []RetailPrice {
	s.retail.mu.Lock()
	defer s.retail.mu.Unlock()
	return slices.Clone(s.retailLocked())
}

// SetRetailPageSize sets the items per page (0: RetailPageSize).
func (s *Server) SetRetailPageSize(n int) {
	s.retail.mu.Lock()
	defer s.retail.mu.Unlock()
	s.retail.pageSize = n
}

// SetRetailCurrencyRate serves currencyCode at rate units per US dollar.
// Only USD is served by default; another code is refused with 400.
func (s *Server) SetRetailCurrencyRate(currencyCode string, rate float64) {
	s.retail.mu.Lock()
	defer s.retail.mu.Unlock()
	if s.retail.rates == nil {
		s.retail.rates = map[string]float64{}
	}
	s.retail.rates[currencyCode] = rate
}

func (s *Server) retailLocked() []RetailPrice {
	if !s.retail.set {
		s.retail.items, s.retail.set = DefaultRetailPrices(), true
	}
	return s.retail.items
}

// serveRetailPrices answers GET /api/retail/prices.
func (s *Server) serveRetailPrices(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeRetailError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Only GET is supported.", 0)
		return
	}
	s.mu.Lock()
	apiErr, retryAfter := s.admit(RetailMethod)
	s.unlock()
	if apiErr != nil {
		writeRetailError(w, apiErr.Status, apiErr.Code, apiErr.Message, retryAfter)
		return
	}
	q := r.URL.Query()
	match := func(RetailPrice) bool { return true }
	if f := q.Get("$filter"); f != "" {
		var err error
		if match, err = parseRetailFilter(f); err != nil {
			writeRetailError(w, http.StatusBadRequest, "BadRequest", "Invalid OData parameters supplied: "+err.Error(), 0)
			return
		}
	}
	skip := 0
	if v := q.Get("$skip"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeRetailError(w, http.StatusBadRequest, "BadRequest", "Invalid OData parameters supplied: $skip", 0)
			return
		}
		skip = n
	}
	currency, rate := "USD", 1.0
	s.retail.mu.Lock()
	if c := strings.Trim(q.Get("currencyCode"), "'"); c != "" && c != "USD" {
		r, ok := s.retail.rates[c]
		if !ok {
			s.retail.mu.Unlock()
			writeRetailError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Invalid currency code %s", c), 0)
			return
		}
		currency, rate = c, r
	}
	size := s.retail.pageSize
	if size <= 0 {
		size = RetailPageSize
	}
	var all []RetailPrice
	for _, it := range s.retailLocked() {
		if match(it) {
			all = append(all, it)
		}
	}
	s.retail.mu.Unlock()
	page := all[min(skip, len(all)):min(skip+size, len(all))]
	out := wireRetailPage{BillingCurrency: currency, CustomerEntityID: "Default", CustomerEntityType: "Retail", Items: []wireRetailItem{}, Count: len(page)}
	for _, it := range page {
		price := math.Round(it.USD*rate*1e6) / 1e6
		out.Items = append(out.Items, wireRetailItem{CurrencyCode: currency, RetailPrice: price, UnitPrice: price, ArmRegionName: it.ArmRegionName,
			Location: it.Location, EffectiveStartDate: it.EffectiveStartDate.UTC().Format(time.RFC3339), MeterID: meterID(it), MeterName: it.MeterName,
			ProductID: "DZH318Z0" + strings.ToUpper(strings.ReplaceAll(it.ProductName, " ", ""))[:4], SkuID: "DZH318Z0/" + it.ArmSkuName, ProductName: it.ProductName,
			SkuName: it.SkuName, ServiceName: it.ServiceName, ServiceID: "DZH313Z7MMC8", ServiceFamily: it.ServiceFamily, UnitOfMeasure: it.UnitOfMeasure,
			Type: it.Type, ReservationTerm: it.ReservationTerm, IsPrimaryMeterRegion: it.IsPrimaryMeterRegion, ArmSkuName: it.ArmSkuName})
	}
	if skip+size < len(all) {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("$skip", strconv.Itoa(skip+size))
		out.NextPageLink = base(r) + "/api/retail/prices?" + next.Encode()
	}
	writeJSON(w, http.StatusOK, out)
}

func meterID(it RetailPrice) string {
	h := uint32(2166136261)
	for _, c := range it.ArmRegionName + "/" + it.SkuName + "/" + it.ProductName + "/" + it.Type {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", h, h)
}

func writeRetailError(w http.ResponseWriter, status int, code, message string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, status, map[string]any{"Error": map[string]string{"Code": code, "Message": message}})
}

type wireRetailPage struct {
	BillingCurrency    string           `json:"BillingCurrency"`
	CustomerEntityID   string           `json:"CustomerEntityId"`
	CustomerEntityType string           `json:"CustomerEntityType"`
	Items              []wireRetailItem `json:"Items"`
	NextPageLink       string           `json:"NextPageLink"`
	Count              int              `json:"Count"`
}

type wireRetailItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	TierMinimumUnits     float64 `json:"tierMinimumUnits"`
	ReservationTerm      string  `json:"reservationTerm,omitempty"`
	RetailPrice          float64 `json:"retailPrice"`
	UnitPrice            float64 `json:"unitPrice"`
	ArmRegionName        string  `json:"armRegionName"`
	Location             string  `json:"location"`
	EffectiveStartDate   string  `json:"effectiveStartDate"`
	MeterID              string  `json:"meterId"`
	MeterName            string  `json:"meterName"`
	ProductID            string  `json:"productId"`
	SkuID                string  `json:"skuId"`
	ProductName          string  `json:"productName"`
	SkuName              string  `json:"skuName"`
	ServiceName          string  `json:"serviceName"`
	ServiceID            string  `json:"serviceId"`
	ServiceFamily        string  `json:"serviceFamily"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	Type                 string  `json:"type"`
	IsPrimaryMeterRegion bool    `json:"isPrimaryMeterRegion"`
	ArmSkuName           string  `json:"armSkuName"`
}

// retailField is the value of a filterable field of an item.
func retailField(it RetailPrice, name string) (string, bool) {
	switch name {
	case "serviceName":
		return it.ServiceName, true
	case "serviceFamily":
		return it.ServiceFamily, true
	case "armRegionName":
		return it.ArmRegionName, true
	case "armSkuName":
		return it.ArmSkuName, true
	case "skuName":
		return it.SkuName, true
	case "meterName":
		return it.MeterName, true
	case "productName":
		return it.ProductName, true
	case "priceType":
		return it.Type, true
	case "location":
		return it.Location, true
	}
	return "", false
}

// parseRetailFilter parses the emulated subset of OData: or of ands of
// comparisons (field eq 'value') and parenthesised expressions.
func parseRetailFilter(f string) (func(RetailPrice) bool, error) {
	toks, err := retailTokens(f)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks}
	m, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.i])
	}
	return m, nil
}

func retailTokens(f string) ([]string, error) {
	var toks []string
	for i := 0; i < len(f); {
		switch c := f[i]; c {
		case ' ':
			i++
		case '(', ')':
			toks = append(toks, string(c))
			i++
		case '\'':
			// A quote inside a value is doubled, as in OData.
			var b strings.Builder
			j := i + 1
			for ; j < len(f); j++ {
				if f[j] == '\'' {
					if j+1 < len(f) && f[j+1] == '\'' {
						b.WriteByte('\'')
						j++
						continue
					}
					break
				}
				b.WriteByte(f[j])
			}
			if j >= len(f) {
				return nil, fmt.Errorf("unterminated string")
			}
			toks = append(toks, "'"+b.String())
			i = j + 1
		default:
			j := i
			for j < len(f) && f[j] != ' ' && f[j] != '(' && f[j] != ')' && f[j] != '\'' {
				j++
			}
			toks = append(toks, f[i:j])
			i = j
		}
	}
	return toks, nil
}

type filterParser struct {
	toks []string
	i    int
}

func (p *filterParser) next() string {
	if p.i >= len(p.toks) {
		return ""
	}
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *filterParser) peek() string {
	if p.i >= len(p.toks) {
		return ""
	}
	return p.toks[p.i]
}

func (p *filterParser) or() (func(RetailPrice) bool, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for strings.EqualFold(p.peek(), "or") {
		p.i++
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(it RetailPrice) bool { return l(it) || right(it) }
	}
	return left, nil
}

func (p *filterParser) and() (func(RetailPrice) bool, error) {
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	for strings.EqualFold(p.peek(), "and") {
		p.i++
		right, err := p.term()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(it RetailPrice) bool { return l(it) && right(it) }
	}
	return left, nil
}

func (p *filterParser) term() (func(RetailPrice) bool, error) {
	if p.peek() == "(" {
		p.i++
		m, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, fmt.Errorf("missing )")
		}
		return m, nil
	}
	field, op, value := p.next(), p.next(), p.next()
	if _, ok := retailField(RetailPrice{}, field); !ok {
		return nil, fmt.Errorf("unknown field %q", field)
	}
	if op != "eq" {
		return nil, fmt.Errorf("operator %q is not emulated", op)
	}
	if !strings.HasPrefix(value, "'") {
		return nil, fmt.Errorf("%s eq %s: not a string", field, value)
	}
	value = value[1:]
	return func(it RetailPrice) bool {
		v, _ := retailField(it, field)
		return v == value
	}, nil
}

// vmSeries are the emulated VM sizes, their series' product name and
// their Linux on-demand price in eastus (USD an hour), of the size and shape
// of Azure's list prices, not a copy of today's; spot is about a fifth.
var vmSeries = []struct {
	arm, sku, product string
	linux, spot       float64
}{
	{"Standard_B2s", "B2s", "Virtual Machines BS Series", 0.0416, 0},
	{"Standard_DS2_v2", "DS2 v2", "Virtual Machines DSv2 Series", 0.146, 0.0292},
	{"Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", 0.096, 0.0192},
	{"Standard_D4s_v5", "D4s v5", "Virtual Machines Dsv5 Series", 0.192, 0.0384},
	{"Standard_D8s_v5", "D8s v5", "Virtual Machines Dsv5 Series", 0.384, 0.0768},
	{"Standard_D4as_v5", "D4as v5", "Virtual Machines Dasv5 Series", 0.172, 0.0344},
	{"Standard_D4s_v3", "D4s v3", "Virtual Machines DSv3 Series", 0.192, 0.0384},
	{"Standard_E4s_v5", "E4s v5", "Virtual Machines Esv5 Series", 0.252, 0.0504},
	{"Standard_F4s_v2", "F4s v2", "Virtual Machines FSv2 Series", 0.169, 0.0338},
}

// DefaultRetailPrices are the retail prices of the emulated VM sizes in
// eastus (US East) and westeurope (West Europe, a tenth dearer): Linux
// on-demand and Spot, and the meters a Linux price must not be taken from
// (Windows, Low Priority, DevTest, a 1-year reservation), plus a meter of
// another service.
func DefaultRetailPrices() []RetailPrice {
	at := time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)
	var out []RetailPrice
	for _, r := range []struct {
		region, location string
		factor           float64
	}{{"eastus", "US East", 1}, {"westeurope", "EU West", 1.1}} {
		round := func(v float64) float64 { return math.Round(v*r.factor*1e4) / 1e4 }
		for _, v := range vmSeries {
			item := func(sku, product, typ string, price float64) RetailPrice {
				return RetailPrice{ArmSkuName: v.arm, ArmRegionName: r.region, Location: r.location, ProductName: product, SkuName: sku, MeterName: sku,
					ServiceName: "Virtual Machines", ServiceFamily: "Compute", Type: typ, UnitOfMeasure: "1 Hour", USD: round(price),
					EffectiveStartDate: at, IsPrimaryMeterRegion: true}
			}
			out = append(out,
				item(v.sku, v.product, "Consumption", v.linux),
				item(v.sku, v.product+" Windows", "Consumption", v.linux*1.9),
				item(v.sku, v.product, "DevTestConsumption", v.linux*0.9))
			reserved := item(v.sku, v.product, "Reservation", v.linux*8760*0.6)
			reserved.ReservationTerm, reserved.UnitOfMeasure = "1 Year", "1 Hour"
			out = append(out, reserved)
			if v.spot > 0 {
				out = append(out,
					item(v.sku+" Spot", v.product, "Consumption", v.spot),
					item(v.sku+" Spot", v.product+" Windows", "Consumption", v.spot*2),
					item(v.sku+" Low Priority", v.product, "Consumption", v.spot))
			}
		}
		out = append(out, RetailPrice{ArmSkuName: "Standard_LRS", ArmRegionName: r.region, Location: r.location, ProductName: "Standard SSD Managed Disks",
			SkuName: "E10 LRS", MeterName: "E10 LRS Disk", ServiceName: "Storage", ServiceFamily: "Storage", Type: "Consumption", UnitOfMeasure: "1/Month",
			USD: round(9.6), EffectiveStartDate: at, IsPrimaryMeterRegion: true})
	}
	return out
}

// FillerRetailPrices returns n Linux on-demand prices of made-up VM sizes
// in region, to give a region's price list the size of Azure's for
// benchmarks.
func FillerRetailPrices(region string, n int) []RetailPrice {
	out := make([]RetailPrice, 0, n)
	for i := range n {
		out = append(out, RetailPrice{ArmSkuName: fmt.Sprintf("Standard_X%d_v9", i), ArmRegionName: region, Location: region, ProductName: "Virtual Machines X Series",
			SkuName: fmt.Sprintf("X%d v9", i), MeterName: fmt.Sprintf("X%d v9", i), ServiceName: "Virtual Machines", ServiceFamily: "Compute", Type: "Consumption",
			UnitOfMeasure: "1 Hour", USD: 0.01 * float64(1+i%100), EffectiveStartDate: time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC), IsPrimaryMeterRegion: true})
	}
	return out
}
