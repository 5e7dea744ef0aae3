package azure

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// The Azure Retail Prices API: public and unauthenticated REST JSON, for
// which Azure ships no Go SDK. RetailPrices speaks to it through an azcore
// pipeline (no credential, azcore's retries, which wait out a 429's
// Retry-After), with an OData $filter per region and up to
// retailSizesPerQuery VM sizes, following NextPageLink.

// RetailPricesEndpoint is the Retail Prices API's address.
const RetailPricesEndpoint = "https://prices.azure.com"

// retailAPIVersion is the version asked for; filter values are compared
// exactly from it on.
const retailAPIVersion = "2023-01-01-preview"

// retailSizesPerQuery bounds the VM sizes of one query (and so the URL's
// length).
const retailSizesPerQuery = 20

// VMPrice is a VM size's Linux pay-as-you-go prices in a region: 0 when
// none is listed.
type VMPrice struct {
	OnDemand, Spot float64
}

// RetailPrices reads VM prices from the Retail Prices API. Build it with
// NewRetailPrices.
type RetailPrices struct {
	base *url.URL
	pl   runtime.Pipeline
}

// NewRetailPrices returns a client of the Retail Prices API at endpoint
// (empty: RetailPricesEndpoint), sending no credential. A throttled (429)
// or failed (5xx) page is asked again up to retries times, after the
// answer's Retry-After or a doubling wait from retryDelay; transport nil
// means net/http's.
func NewRetailPrices(endpoint string, retries int, retryDelay time.Duration, transport policy.Transporter) (*RetailPrices, error) {
	if endpoint == "" {
		endpoint = RetailPricesEndpoint
	}
	u, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the Retail Prices endpoint %q is not an http:// or https:// URL", endpoint)
	}
	opts := &policy.ClientOptions{Transport: transport, Retry: policy.RetryOptions{MaxRetries: int32(retries), RetryDelay: retryDelay,
		MaxRetryDelay: time.Minute, StatusCodes: []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}}}
	if retries <= 0 {
		opts.Retry.MaxRetries = -1 // azcore: no retry
	}
	return &RetailPrices{base: u, pl: runtime.NewPipeline("spotter-retailprices", "v1", runtime.PipelineOptions{}, opts)}, nil
}

// wireRetailPage is a page of the API's answer.
type wireRetailPage struct {
	BillingCurrency string           `json:"BillingCurrency"`
	Items           []wireRetailItem `json:"Items"`
	NextPageLink    string           `json:"NextPageLink"`
}

type wireRetailItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	RetailPrice          float64 `json:"retailPrice"`
	ArmRegionName        string  `json:"armRegionName"`
	ArmSkuName           string  `json:"armSkuName"`
	SkuName              string  `json:"skuName"`
	ProductName          string  `json:"productName"`
	Type                 string  `json:"type"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	EffectiveStartDate   string  `json:"effectiveStartDate"`
	IsPrimaryMeterRegion bool    `json:"isPrimaryMeterRegion"`
}

// VMPrices returns the Linux pay-as-you-go prices (on-demand and Spot;
// never Windows, Low Priority, DevTest or reservations) of sizes in region,
// by lowercase size, in currency (empty: USD). A size the API does not list
// is absent. It makes one query (with its pages) per retailSizesPerQuery
// sizes.
func (c *RetailPrices) VMPrices(ctx context.Context, region string, sizes []string, currency string) (map[string]VMPrice, int, error) {
	if currency == "" {
		currency = "USD"
	}
	out := map[string]VMPrice{}
	chosen := map[string]wireRetailItem{} // the item each size/spot price comes from
	calls := 0
	for len(sizes) > 0 {
		batch := sizes[:min(len(sizes), retailSizesPerQuery)]
		sizes = sizes[len(batch):]
		terms := make([]string, len(batch))
		for i, s := range batch {
			terms[i] = "armSkuName eq " + odataString(s)
		}
		q := url.Values{}
		q.Set("api-version", retailAPIVersion)
		q.Set("currencyCode", "'"+currency+"'")
		q.Set("$filter", "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq "+odataString(region)+
			" and ("+strings.Join(terms, " or ")+")")
		next := c.base.String() + "/api/retail/prices?" + q.Encode()
		for next != "" {
			page, err := c.page(ctx, next)
			calls++
			if err != nil {
				return nil, calls, fmt.Errorf("reading the retail prices of %s in %s: %w", strings.Join(batch, ", "), region, err)
			}
			for _, it := range page.Items {
				linuxPrice(it, currency, chosen, out)
			}
			if next, err = c.follow(page.NextPageLink); err != nil {
				return nil, calls, err
			}
		}
	}
	return out, calls, nil
}

// linuxPrice records an item when it is a Linux pay-as-you-go price per
// hour in currency, preferring the primary meter region's, then the latest.
func linuxPrice(it wireRetailItem, currency string, chosen map[string]wireRetailItem, out map[string]VMPrice) {
	if it.Type != "Consumption" || it.UnitOfMeasure != "1 Hour" || it.CurrencyCode != currency || it.RetailPrice <= 0 ||
		strings.Contains(it.ProductName, "Windows") || strings.Contains(it.SkuName, "Low Priority") {
		return
	}
	spot := strings.HasSuffix(it.SkuName, " Spot")
	size := strings.ToLower(it.ArmSkuName)
	key := fmt.Sprintf("%s/%v", size, spot)
	if prev, ok := chosen[key]; ok && (prev.IsPrimaryMeterRegion && !it.IsPrimaryMeterRegion ||
		prev.IsPrimaryMeterRegion == it.IsPrimaryMeterRegion && prev.EffectiveStartDate >= it.EffectiveStartDate) {
		return
	}
	chosen[key] = it
	p := out[size]
	if spot {
		p.Spot = it.RetailPrice
	} else {
		p.OnDemand = it.RetailPrice
	}
	out[size] = p
}

// follow turns a NextPageLink into the URL to read: its path and query on
// the client's endpoint, so that a proxy or test endpoint keeps serving the
// pages. Empty: no more pages.
func (c *RetailPrices) follow(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	u, err := url.Parse(link)
	if err != nil {
		return "", fmt.Errorf("the Retail Prices API's NextPageLink %q: %w", link, err)
	}
	next := *c.base
	next.Path, next.RawPath, next.RawQuery = c.base.Path+u.Path, "", u.RawQuery
	return next.String(), nil
}

func (c *RetailPrices) page(ctx context.Context, u string) (*wireRetailPage, error) {
	req, err := runtime.NewRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := c.pl.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, mapError("", runtime.NewResponseError(resp))
	}
	var page wireRetailPage
	if err := runtime.UnmarshalAsJSON(resp, &page); err != nil {
		return nil, fmt.Errorf("the Retail Prices API's answer: %w", err)
	}
	return &page, nil
}

// odataString quotes s as an OData string literal.
func odataString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
