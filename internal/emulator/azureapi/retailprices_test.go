package azureapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

type retailPage struct {
	BillingCurrency string
	Items           []struct {
		ArmSkuName, SkuName, ProductName, Type, CurrencyCode string
		RetailPrice                                          float64
	}
	NextPageLink string
	Count        int
}

func getRetail(t *testing.T, u string) (int, http.Header, retailPage) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p retailPage
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, resp.Header, p
}

// The Retail Prices API over plain HTTP, as there is no SDK: the filter
// (and, or, parentheses, exact values), pages through NextPageLink,
// currencies, and the errors.
func TestRetailPricesAPI(t *testing.T) {
	s := New(Options{Token: "arm-only"})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.SetRetailPageSize(3)
	q := url.Values{"api-version": {"2023-01-01-preview"},
		"$filter": {"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq 'eastus' and (armSkuName eq 'Standard_D4s_v5' or armSkuName eq 'Standard_B2s')"}}
	next := srv.URL + "/api/retail/prices?" + q.Encode()
	var items int
	pages := 0
	for next != "" {
		code, _, p := getRetail(t, next)
		if code != http.StatusOK {
			t.Fatalf("page %d: status %d (the API needs no token)", pages, code)
		}
		for _, it := range p.Items {
			if it.Type != "Consumption" || (it.ArmSkuName != "Standard_D4s_v5" && it.ArmSkuName != "Standard_B2s") || p.BillingCurrency != "USD" {
				t.Errorf("item %+v does not match the filter", it)
			}
		}
		if p.Count != len(p.Items) {
			t.Errorf("Count %d for %d items", p.Count, len(p.Items))
		}
		items += len(p.Items)
		pages++
		next = p.NextPageLink
	}
	// D4s v5: Linux, Windows, Spot, Spot Windows, Low Priority; B2s: Linux, Windows.
	if items != 7 || pages != 3 || s.Calls(RetailMethod) != 3 {
		t.Errorf("%d items in %d pages (%d calls), want 7 in 3", items, pages, s.Calls(RetailMethod))
	}

	// Values are compared exactly.
	q.Set("$filter", "armSkuName eq 'standard_d4s_v5'")
	if code, _, p := getRetail(t, srv.URL+"/api/retail/prices?"+q.Encode()); code != http.StatusOK || len(p.Items) != 0 {
		t.Errorf("lowercase size: %d, %d items, want none", code, len(p.Items))
	}
	s.SetRetailCurrencyRate("EUR", 2)
	q.Set("$filter", "armSkuName eq 'Standard_B2s' and armRegionName eq 'eastus' and productName eq 'Virtual Machines BS Series' and priceType eq 'Consumption'")
	q.Set("currencyCode", "'EUR'")
	if code, _, p := getRetail(t, srv.URL+"/api/retail/prices?"+q.Encode()); code != http.StatusOK || len(p.Items) != 1 || p.Items[0].RetailPrice != 0.0832 ||
		p.Items[0].CurrencyCode != "EUR" || p.BillingCurrency != "EUR" {
		t.Errorf("EUR: %d %+v, want 0.0832 EUR", code, p)
	}
	for _, bad := range []string{"armSkuName ne 'x'", "contains(meterName, 'Spot')", "armSkuName eq 'x' and", "(armSkuName eq 'x'", "nope eq 'x'", "armSkuName eq 'x"} {
		q.Set("$filter", bad)
		if code, _, _ := getRetail(t, srv.URL+"/api/retail/prices?"+q.Encode()); code != http.StatusBadRequest {
			t.Errorf("filter %q: %d, want 400", bad, code)
		}
	}
	q.Del("$filter")
	q.Set("currencyCode", "'XYZ'")
	if code, _, _ := getRetail(t, srv.URL+"/api/retail/prices?"+q.Encode()); code != http.StatusBadRequest {
		t.Errorf("an unknown currency: %d, want 400", code)
	}
	s.ThrottleNext(1)
	s.SetRetryAfter(7)
	if code, h, _ := getRetail(t, srv.URL+"/api/retail/prices"); code != http.StatusTooManyRequests || h.Get("Retry-After") != "7" {
		t.Errorf("throttled: %d, Retry-After %q", code, h.Get("Retry-After"))
	}
}
