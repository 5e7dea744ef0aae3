package gcpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	billing "cloud.google.com/go/billing/apiv1"
	"cloud.google.com/go/billing/apiv1/billingpb"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// catalogClient is the official Cloud Billing Catalog client (REST) on an
// emulator.
func catalogClient(t *testing.T, s *Server) *billing.CloudCatalogClient {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := billing.NewCloudCatalogRESTClient(context.Background(), option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func listAll(c *billing.CloudCatalogClient, req *billingpb.ListSkusRequest) ([]*billingpb.Sku, error) {
	var out []*billingpb.Sku
	it := c.ListSkus(context.Background(), req)
	for {
		sku, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, sku)
	}
}

// The SDK reads every SKU of the catalog through the pages, with the
// category, regions and price it was given (enums as numbers, as the
// client asks).
func TestBillingCatalogThroughSDK(t *testing.T) {
	s := New(Options{})
	c := catalogClient(t, s)
	want := DefaultSKUs()
	got, err := listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService, PageSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d SKUs, want %d", len(got), len(want))
	}
	if n, pages := s.Calls(BillingMethod), (len(want)+6)/7; n != pages {
		t.Errorf("%d calls for %d SKUs in pages of 7, want %d", n, len(want), pages)
	}
	for i, sku := range got {
		w := want[i]
		p := sku.GetPricingInfo()[0].GetPricingExpression()
		price := float64(p.GetTieredRates()[0].GetUnitPrice().GetUnits()) + float64(p.GetTieredRates()[0].GetUnitPrice().GetNanos())/1e9
		if sku.GetDescription() != w.Description || sku.GetCategory().GetUsageType() != w.UsageType || sku.GetCategory().GetResourceGroup() != w.ResourceGroup ||
			sku.GetServiceRegions()[0] != w.Regions[0] || p.GetUsageUnit() != w.UsageUnit || price < w.USD-1e-9 || price > w.USD+1e-9 ||
			!strings.HasPrefix(sku.GetName(), "services/"+ComputeEngineService+"/skus/") || sku.GetGeoTaxonomy().GetType() != billingpb.GeoTaxonomy_REGIONAL {
			t.Errorf("SKU %d: %v, want %+v", i, sku, w)
		}
	}

	// Another currency is served once it has a rate, and refused before.
	_, err = listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService, CurrencyCode: "EUR"})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusBadRequest {
		t.Errorf("EUR without a rate: %v, want 400", err)
	}
	s.SetCurrencyRate("EUR", 0.5)
	s.SetSKUs([]SKU{{Description: "N2 Instance Core running in Americas", ResourceFamily: "Compute", ResourceGroup: "CPU", UsageType: "OnDemand",
		Regions: []string{"us-central1"}, UsageUnit: "h", USD: 2.5}})
	got, err = listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService, CurrencyCode: "EUR"})
	if err != nil || len(got) != 1 {
		t.Fatalf("EUR: %v %v", got, err)
	}
	if m := got[0].GetPricingInfo()[0].GetPricingExpression().GetTieredRates()[0].GetUnitPrice(); m.GetCurrencyCode() != "EUR" || m.GetUnits() != 1 || m.GetNanos() != 250_000_000 {
		t.Errorf("EUR price %v, want 1.25 EUR", m)
	}

	// Another service lists nothing; start and end times are not emulated.
	if got, err := listAll(c, &billingpb.ListSkusRequest{Parent: "services/95FF-2EF5-5EA1"}); err != nil || len(got) != 0 {
		t.Errorf("another service: %d SKUs, %v", len(got), err)
	}
}

// Throttling and injected errors reach the SDK as Google's error envelope.
func TestBillingCatalogFaults(t *testing.T) {
	s := New(Options{})
	c := catalogClient(t, s)
	s.ThrottleNext(1)
	s.SetRetryAfter(3)
	_, err := listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusTooManyRequests || ge.Header.Get("Retry-After") != "3" || len(ge.Errors) != 1 || ge.Errors[0].Reason != "rateLimitExceeded" {
		t.Errorf("throttled: %v, want 429 rateLimitExceeded with Retry-After 3", err)
	}
	s.FailNext(BillingMethod, APIError{Code: http.StatusForbidden, Reason: "accessNotConfigured", Message: "Cloud Billing API has not been used in project 1 before or it is disabled."})
	if _, err := listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService}); !errors.As(err, &ge) || ge.Code != http.StatusForbidden {
		t.Errorf("injected error: %v, want 403", err)
	}
	if got, err := listAll(c, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService}); err != nil || len(got) != len(DefaultSKUs()) {
		t.Errorf("after the faults: %d SKUs, %v", len(got), err)
	}
	if s.Throttled(BillingMethod) != 1 || s.Calls(BillingMethod) != 3 {
		t.Errorf("throttled %d, calls %d; want 1 and 3", s.Throttled(BillingMethod), s.Calls(BillingMethod))
	}
}
