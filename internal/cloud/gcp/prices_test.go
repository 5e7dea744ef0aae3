package gcp

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/emulator/gcpapi"
)

// catalogRate is the emulator's price of the SKU described desc in region.
func catalogRate(t *testing.T, desc, region string) float64 {
	t.Helper()
	for _, s := range gcpapi.DefaultSKUs() {
		if s.Description == desc && s.Regions[0] == region {
			return s.USD
		}
	}
	t.Fatalf("no SKU %q in %s", desc, region)
	return 0
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// pricedNodes adds stand-alone instances of other machine types (one per
// case) and returns their Nodes.
func (l *lab) pricedNodes(t *testing.T, specs ...gcpapi.Instance) []*corev1.Node {
	t.Helper()
	var out []*corev1.Node
	for _, s := range specs {
		s.Project = project
		i, err := l.emu.AddInstance(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: i.Name}, Spec: corev1.NodeSpec{ProviderID: i.ProviderID()}})
	}
	return out
}

// Machine types without a configured price are priced from the Cloud
// Billing Catalog: vCPUs times the family's core price plus GiB times its
// RAM price, in the instance's region, on-demand or spot; shared-core,
// per-instance and custom types as the catalog prices them; a configured
// price wins; a type the catalog cannot price has none. The catalog is
// read once (one paged list) per PriceTTL.
func TestPricesFromCatalog(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	spot := gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot}
	nodes := append(l.nodes(t), l.pricedNodes(t,
		gcpapi.Instance{Name: "n2-od", Zone: "us-central1-a", MachineType: "n2-standard-4"},
		gcpapi.Instance{Name: "n2-spot", Zone: "us-central1-b", MachineType: "n2-standard-4", Scheduling: spot},
		gcpapi.Instance{Name: "n2-eu", Zone: "europe-west1-b", MachineType: "n2-standard-4"},
		gcpapi.Instance{Name: "e2-shared", Zone: "us-central1-a", MachineType: "e2-medium"},
		gcpapi.Instance{Name: "f1", Zone: "us-central1-a", MachineType: "f1-micro"},
		gcpapi.Instance{Name: "custom", Zone: "us-central1-a", MachineType: "n2-custom-6-20480"},
		gcpapi.Instance{Name: "custom-ext", Zone: "us-central1-a", MachineType: "n2-custom-2-20480-ext"},
		gcpapi.Instance{Name: "c3", Zone: "us-central1-a", MachineType: "c3-standard-4"},
		gcpapi.Instance{Name: "t2d-asia", Zone: "asia-east1-a", MachineType: "t2d-standard-4"},
	)...)
	inst, err := l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if inst["n2-od"].PriceKnown || inst["n2-od"].Region != "us-central1" {
		t.Errorf("before RefreshPrices: %+v, want no price yet (configured only) and region us-central1", inst["n2-od"])
	}
	var types []string
	for _, i := range inst {
		types = append(types, i.InstanceType)
	}
	l.emu.ResetCalls()
	if err := l.p.RefreshPrices(ctx, []string{"e2-standard-4"}); err != nil || len(l.emu.AllCalls()) != 0 {
		t.Errorf("a refresh of configured types only: %v, calls %v, want none", err, l.emu.AllCalls())
	}
	if err := l.p.RefreshPrices(ctx, types); err != nil {
		t.Fatal(err)
	}
	if c := l.emu.AllCalls(); c[gcpapi.BillingMethod] != 1 || c["compute.machineTypes.get"] != 5 {
		t.Errorf("calls %v: want one catalog list and a machineTypes.get per predefined type (n2-standard-4, e2-medium, f1-micro, c3-standard-4, t2d-standard-4)", c)
	}
	inst, err = l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	us := func(d string) float64 { return catalogRate(t, d, "us-central1") }
	cases := []struct {
		node  string
		want  float64
		known bool
	}{
		{nodes[0].Name, 0.134, true}, // e2-standard-4, configured
		{"n2-od", 4*us("N2 Instance Core running in Americas") + 16*us("N2 Instance Ram running in Americas"), true},
		{"n2-spot", 4*us("Spot Preemptible N2 Instance Core running in Americas") + 16*us("Spot Preemptible N2 Instance Ram running in Americas"), true},
		{"n2-eu", 4*catalogRate(t, "N2 Instance Core running in EMEA", "europe-west1") + 16*catalogRate(t, "N2 Instance Ram running in EMEA", "europe-west1"), true},
		{"e2-shared", 1*us("E2 Instance Core running in Americas") + 4*us("E2 Instance Ram running in Americas"), true}, // billed for 1 of its 2 vCPUs
		{"f1", us("Micro Instance with burstable CPU running in Americas"), true},
		{"custom", 6*us("N2 Custom Instance Core running in Americas") + 20*us("N2 Custom Instance Ram running in Americas"), true},
		{"custom-ext", 0, false}, // extended memory: not priced
		{"c3", 4*us("C3 Instance Core running in Americas") + 16*us("C3 Instance Ram running in Americas"), true},
		{"t2d-asia", 0, false}, // a region the catalog does not list
	}
	for _, c := range cases {
		got := inst[c.node]
		if got.PriceKnown != c.known || !near(got.PricePerHour, c.want) {
			t.Errorf("%s (%s): price %v known %v, want %v %v", c.node, got.InstanceType, got.PricePerHour, got.PriceKnown, c.want, c.known)
		}
	}
	if p, ok := l.p.InstanceTypePrice("n2-standard-4", "", "us-central1-f", true); !ok || !near(p, inst["n2-spot"].PricePerHour) {
		t.Errorf("InstanceTypePrice(n2-standard-4, spot, us-central1-f) = %v %v, want the spot instance's", p, ok)
	}
	if p, ok := l.p.InstanceTypePrice("e2-standard-4", "us-central1", "", true); !ok || p != 0.04 {
		t.Errorf("configured spot price: %v %v, want 0.04", p, ok)
	}
	if _, ok := l.p.InstanceTypePrice("x9-standard-4", "us-central1", "", false); ok {
		t.Error("an unknown machine type has a price")
	}
	// Node groups: the spot group of e2-standard-4 has its configured price.
	g, err := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := g.PricePerHour(); !ok || p != 0.04 {
		t.Errorf("spot group price %v %v, want the configured 0.04", p, ok)
	}

	// Within PriceTTL nothing is read again; after it, the catalog once more.
	l.emu.ResetCalls()
	if err := l.p.RefreshPrices(ctx, types); err != nil || l.emu.Calls(gcpapi.BillingMethod) != 0 || l.emu.Calls("compute.machineTypes.get") != 0 {
		t.Errorf("a refresh within PriceTTL: %v, calls %v", err, l.emu.AllCalls())
	}
	l.clock.Step(61 * time.Minute)
	if err := l.p.RefreshPrices(ctx, types); err != nil || l.emu.Calls(gcpapi.BillingMethod) != 1 || l.emu.Calls("compute.machineTypes.get") != 1 {
		t.Errorf("a refresh after PriceTTL: %v, calls %v (sizes are cached for good; f1-micro, which the emulator's Compute Engine does not know, is asked about again)",
			err, l.emu.AllCalls())
	}
}

// The catalog is read in pages of 5,000; a throttled page is asked again
// (after Retry-After, or a backoff) rather than the list started over; a
// throttle that lasts gives a *cloud.ThrottledError and leaves the prices
// read before.
func TestCatalogPagingAndThrottling(t *testing.T) {
	l := newLab(t, prodGroups)
	l.p.opts.CatalogRetryWait = 10 * time.Millisecond
	l.groups(t)
	ctx := context.Background()
	l.emu.SetSKUs(append(gcpapi.FillerSKUs(12_000), gcpapi.DefaultSKUs()...))
	nodes := l.pricedNodes(t, gcpapi.Instance{Name: "n2", Zone: "us-central1-a", MachineType: "n2-standard-4"})
	if _, err := l.p.Instances(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	// A throttled machine type read does not stop the catalog's.
	l.emu.ThrottleNext(1)
	if err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"}); !cloud.IsThrottled(err) || l.emu.Calls(gcpapi.BillingMethod) != 3 {
		t.Errorf("a throttled size read: %v, %d catalog calls, want the throttle and the 3 pages", err, l.emu.Calls(gcpapi.BillingMethod))
	}
	l.clock.Step(2 * time.Hour)
	l.emu.ResetCalls()
	l.emu.ThrottleNext(3)
	// The throttle hits the machine type's get first (asked again at the
	// next refresh), then the first catalog page twice, asked again each
	// time.
	if err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"}); !cloud.IsThrottled(err) {
		t.Errorf("a throttled size read: %v", err)
	}
	if c := l.emu.AllCalls(); c[gcpapi.BillingMethod] != 5 || l.emu.Throttled(gcpapi.BillingMethod) != 2 {
		t.Errorf("calls %v, throttled %d: want 3 pages of 12,000+ SKUs and two retries", c, l.emu.Throttled(gcpapi.BillingMethod))
	}
	if err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"}); err != nil {
		t.Fatal(err)
	}
	p, ok := l.p.InstanceTypePrice("n2-standard-4", "us-central1", "", false)
	if want := 4*catalogRate(t, "N2 Instance Core running in Americas", "us-central1") + 16*catalogRate(t, "N2 Instance Ram running in Americas", "us-central1"); !ok || !near(p, want) {
		t.Errorf("n2-standard-4: %v %v, want %v", p, ok, want)
	}

	l.clock.Step(2 * time.Hour)
	l.emu.SetRetryAfter(0)
	l.emu.ThrottleNext(catalogRetries + 1)
	err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"})
	if !cloud.IsThrottled(err) {
		t.Errorf("a lasting throttle: %v, want a *cloud.ThrottledError", err)
	}
	if p2, ok := l.p.InstanceTypePrice("n2-standard-4", "us-central1", "", false); !ok || p2 != p {
		t.Errorf("after a failed refresh: %v %v, want the prices read before (%v)", p2, ok, p)
	}

	// Another error (the API not enabled in the project) is returned as it is.
	l.emu.FailNext(gcpapi.BillingMethod, gcpapi.APIError{Code: http.StatusForbidden, Reason: "accessNotConfigured", Message: "Cloud Billing API has not been used in project 1"})
	if err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"}); err == nil || cloud.IsThrottled(err) {
		t.Errorf("403: %v", err)
	}
}

// A throttled answer is retried after its Retry-After (at most a minute),
// else after a doubling wait, catalogRetries times; other errors are not.
func TestThrottleRetryer(t *testing.T) {
	r := &throttleRetryer{b: backoff.Backoff{Initial: time.Second, Max: 30 * time.Second}, left: catalogRetries}
	throttled := &googleapi.Error{Code: http.StatusTooManyRequests, Header: http.Header{}}
	withWait := &googleapi.Error{Code: http.StatusTooManyRequests, Header: http.Header{"Retry-After": []string{"7"}}}
	long := &googleapi.Error{Code: http.StatusTooManyRequests, Header: http.Header{"Retry-After": []string{"600"}}}
	var got []time.Duration
	for _, err := range []error{throttled, withWait, throttled, long, throttled} {
		d, ok := r.Retry(err)
		if !ok {
			d = -1
		}
		got = append(got, d)
	}
	want := []time.Duration{time.Second, 7 * time.Second, 4 * time.Second, time.Minute, -1}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if _, ok := (&throttleRetryer{left: 3}).Retry(&googleapi.Error{Code: http.StatusForbidden}); ok {
		t.Error("a 403 was retried")
	}
}

// An accelerator-optimized type has no price even where the catalog lists
// its series' vCPU and memory rates: its GPUs are billed apart.
func TestAcceleratorTypesUnpriced(t *testing.T) {
	r := rates{core: 0.03, ram: 0.004}
	table := &priceTable{rates: map[rateKey]rates{{region: "us-central1", family: "a2"}: r, {region: "us-central1", family: "n2"}: r}}
	size := machineFacts{cpus: 12, memMB: 87040}
	if p, ok := table.machinePrice("us-central1", "a2-highgpu-1g", size, true, false); ok {
		t.Errorf("a2-highgpu-1g priced %v", p)
	}
	if p, ok := table.machinePrice("us-central1", "n2-highmem-12", size, true, false); !ok || !near(p, 12*0.03+85*0.004) {
		t.Errorf("n2 with the same rates: %v %v", p, ok)
	}
}

func TestParseDescription(t *testing.T) {
	for _, c := range []struct {
		desc   string
		family string
		custom bool
		res    skuResource
		ok     bool
	}{
		{"N2 Instance Core running in Americas", "n2", false, resCore, true},
		{"Spot Preemptible N2D AMD Instance Ram running in EMEA", "n2d", false, resRAM, true},
		{"Preemptible E2 Instance Core running in Japan", "e2", false, resCore, true},
		{"N1 Predefined Instance Ram running in Zurich", "n1", false, resRAM, true},
		{"N2 Custom Instance Core running in Americas", "n2", true, resCore, true},
		{"Spot Preemptible E2 Custom Instance Core running in Paris", "e2", true, resCore, true},
		{"Custom Instance Ram running in Americas", "n1", true, resRAM, true},
		{"Compute optimized Core running in Americas", "c2", false, resCore, true},
		{"Memory-optimized Instance Ram running in Americas", "m1", false, resRAM, true},
		{"M3 Memory-optimized Instance Core running in Tokyo", "m3", false, resCore, true},
		{"T2A Arm Instance Core running in Americas", "t2a", false, resCore, true},
		{"Micro Instance with burstable CPU running in Americas", "f1-micro", false, resInstance, true},
		{"Small Instance with 1 VCPU running in EMEA", "g1-small", false, resInstance, true},
		{"N2 Sole Tenancy Instance Core running in Americas", "", false, 0, false},
		{"N2 Custom Extended Instance Ram running in Americas", "", false, 0, false},
		{"Commitment v1: E2 Cpu in Americas for 1 Year", "", false, 0, false},
		{"Nvidia Tesla T4 GPU running in Americas", "", false, 0, false},
		{"Sole Tenancy Instance RAM running in Jakarta", "", false, 0, false},
		{"Licensing Fee for Windows Server 2019 Datacenter Edition (CPU cost)", "", false, 0, false},
		{"Memory Optimized Upgrade Premium for Memory-optimized Instance Core running in Americas", "", false, 0, false},
	} {
		family, custom, res, ok := parseDescription(c.desc)
		if family != c.family || custom != c.custom || res != c.res || ok != c.ok {
			t.Errorf("%q: %q %v %v %v, want %q %v %v %v", c.desc, family, custom, res, ok, c.family, c.custom, c.res, c.ok)
		}
	}
}

// A price refresh through the official client against the emulator: one
// paged list of a catalog of 40,000 SKUs (pages of 5,000), parsed into
// rates, and the size of one machine type.
//
//	go test ./internal/cloud/gcp -run '^$' -bench PriceRefresh -benchtime 5x
func BenchmarkPriceRefresh(b *testing.B) {
	l := newLab(b, prodGroups)
	l.emu.SetSKUs(append(gcpapi.FillerSKUs(40_000-len(gcpapi.DefaultSKUs())), gcpapi.DefaultSKUs()...))
	i, err := l.emu.AddInstance(gcpapi.Instance{Project: project, Zone: "us-central1-a", Name: "n2", MachineType: "n2-standard-4"})
	if err != nil {
		b.Fatal(err)
	}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: i.Name}, Spec: corev1.NodeSpec{ProviderID: i.ProviderID()}}}
	ctx := context.Background()
	if _, err := l.p.Instances(ctx, nodes); err != nil {
		b.Fatal(err)
	}
	l.emu.ResetCalls()
	for b.Loop() {
		l.clock.Step(2 * time.Hour) // every refresh reads the catalog
		if err := l.p.RefreshPrices(ctx, []string{"n2-standard-4"}); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := l.p.InstanceTypePrice("n2-standard-4", "us-central1", "", false); !ok {
		b.Fatal("no price")
	}
	b.ReportMetric(float64(l.emu.Calls(gcpapi.BillingMethod))/float64(b.N), "catalog-calls/op")
	b.ReportMetric(float64(l.p.prices.skus), "skus")
}

// Descriptions come from the catalog: whatever they say, parsing does not
// panic, and what it accepts names a lowercase family and a resource.
func FuzzParseDescription(f *testing.F) {
	for _, s := range []string{"N2 Instance Core running in Americas", "Spot Preemptible N2D AMD Instance Ram running in EMEA",
		"Compute optimized Core running in Americas", "Small Instance with 1 VCPU running in EMEA", "Commitment v1: E2 Cpu in Americas for 1 Year",
		" running in ", "Preemptible  Core running in x", "E2 Custom Instance Core running in"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		family, _, res, ok := parseDescription(desc)
		if !ok {
			return
		}
		if family == "" || family != strings.ToLower(family) || res < resCore || res > resInstance {
			t.Errorf("%q: family %q, resource %v", desc, family, res)
		}
	})
}
