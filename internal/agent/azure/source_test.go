package azure

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/internal/watchtest"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/emulator/azureimds"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const providerID = "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-spot-vmss/virtualMachines/3"

// setup starts an emulator whose VM is aks-spot-vmss_3 and a Source on a fake
// clock; every request is checked for Metadata: true.
func setup(t *testing.T, cfg Config) (*azureimds.Server, *testingclock.FakeClock, *Source) {
	t.Helper()
	clk := testingclock.NewFakeClock(start)
	imds := azureimds.New(azureimds.Options{VMName: "aks-spot-vmss_3"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(MetadataHeader) != "true" {
			t.Errorf("%s %s without Metadata: true", r.Method, r.URL)
		}
		imds.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg.Endpoint = srv.URL
	cfg.Clock = clk
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return imds, clk, src
}

func TestPreemptAcknowledgedAndEnded(t *testing.T) {
	imds, clk, src := setup(t, Config{ProviderID: providerID})
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)

	notBefore := start.Add(30 * time.Second)
	imds.AddEvent(azureimds.Event{EventID: "other", EventType: "Preempt", Resources: []string{"aks-spot-vmss_4"}, NotBefore: notBefore})
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out) // another VM's event

	imds.AddEvent(azureimds.Event{EventID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123", EventType: "Preempt",
		Resources: []string{"aks-spot-vmss_4", "AKS-SPOT-VMSS_3"}, NotBefore: notBefore})
	watchtest.Step(t, clk, time.Second)
	got := watchtest.Next(t, out)
	want := notice.Notice{Cloud: "azure", Kind: notice.Termination, ID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123", Action: "Preempt", Deadline: notBefore,
		Detail: "Azure Preempt event C7061BAC-AFDC-4513-B24B-AA5F13A16123 (Scheduled, source Platform) not before 2030-01-02T03:04:35Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)

	// The acknowledgement reaches the service, which starts the event: the
	// notice comes again, Started, with the same deadline.
	if err := src.Acknowledge(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if acks := imds.Acks(); !slices.Equal(acks, []string{got.ID}) {
		t.Errorf("acks = %v", acks)
	}
	watchtest.Step(t, clk, time.Second)
	started := watchtest.Next(t, out)
	if started.ID != got.ID || !started.Deadline.Equal(notBefore) || started.Ended ||
		started.Detail != "Azure Preempt event C7061BAC-AFDC-4513-B24B-AA5F13A16123 (Started, source Platform) not before 2030-01-02T03:04:35Z" {
		t.Errorf("after the acknowledgement: %+v", started)
	}

	// Gone from the document: Ended.
	imds.RemoveEvent(got.ID)
	watchtest.Step(t, clk, time.Second)
	if ended := watchtest.Next(t, out); !ended.Ended || ended.ID != got.ID || ended.Kind != notice.Termination {
		t.Errorf("after removal: %+v, want Ended", ended)
	}
	imds.RemoveEvent("other")
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
}

func TestEmptyNotBeforeGetsTheDocumentedMinimum(t *testing.T) {
	imds, clk, src := setup(t, Config{ProviderID: providerID})
	imds.AddEvent(azureimds.Event{EventID: "p", EventType: "Preempt", Resources: []string{"aks-spot-vmss_3"}, EventStatus: "Started"})
	imds.AddEvent(azureimds.Event{EventID: "r", EventType: "Reboot", Resources: []string{"aks-spot-vmss_3"}, EventSource: "User", Description: "user reboot"})
	out := watchtest.Start(t, src)
	got := map[string]notice.Notice{}
	for range 2 {
		n := watchtest.Next(t, out)
		got[n.ID] = n
	}
	if n := got["p"]; n.Kind != notice.Termination || !n.Deadline.Equal(start.Add(30*time.Second)) {
		t.Errorf("Preempt: %+v, want a termination due 30s after it was seen", n)
	}
	if n := got["r"]; n.Kind != notice.Maintenance || !n.Deadline.Equal(start.Add(15*time.Minute)) ||
		n.Detail != "Azure Reboot event r (Scheduled, source User) not before 2030-01-02T03:19:05Z: user reboot" {
		t.Errorf("Reboot: %+v, want maintenance due 15m after it was seen", n)
	}
	// A new incarnation that leaves the events as they were changes nothing,
	// though the clock moved.
	imds.AddEvent(azureimds.Event{EventID: "x", EventType: "Freeze", Resources: []string{"elsewhere"}})
	watchtest.Step(t, clk, 10*time.Second)
	watchtest.None(t, out)
}

func TestVMNameFromMetadata(t *testing.T) {
	imds, clk, src := setup(t, Config{}) // no provider ID
	imds.AddEvent(azureimds.Event{EventID: "f", EventType: "Freeze", Resources: []string{"aks-spot-vmss_3"}, NotBefore: start.Add(time.Hour)})
	out := watchtest.Start(t, src)
	if n := watchtest.Next(t, out); n.ID != "f" || n.Kind != notice.Maintenance || n.Action != "Freeze" {
		t.Errorf("notice = %+v", n)
	}
	watchtest.Step(t, clk, time.Second)
	if n := imds.Requests(azureimds.VMNamePath); n != 1 {
		t.Errorf("compute/name read %d times, want once", n)
	}
}

// docServer serves the documents a test sets, to check incarnation handling
// independently of the emulator.
type docServer struct {
	mu   sync.Mutex
	body string
}

func (d *docServer) set(body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.body = body
}

func (d *docServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.body == "" {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, d.body)
}

func TestOnlyANewIncarnationIsProcessed(t *testing.T) {
	docs := &docServer{}
	srv := httptest.NewServer(docs)
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk, ProviderID: providerID, MaxBackoff: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := watchtest.Start(t, src)
	watchtest.Step(t, clk, 2*time.Second) // errors are retried
	watchtest.None(t, out)

	docs.set(`{"DocumentIncarnation":5,"Events":[{"EventId":"a","EventType":"Redeploy","Resources":["aks-spot-vmss_3"],"EventStatus":"Scheduled","NotBefore":"Wed, 02 Jan 2030 04:00:00 GMT"}]}`)
	watchtest.Step(t, clk, 2*time.Second)
	if n := watchtest.Next(t, out); n.ID != "a" || !n.Deadline.Equal(time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)) {
		t.Errorf("notice = %+v", n)
	}

	// Same incarnation, different events: not processed.
	docs.set(`{"DocumentIncarnation":5,"Events":[{"EventId":"b","EventType":"Terminate","Resources":["aks-spot-vmss_3"],"EventStatus":"Scheduled","NotBefore":""}]}`)
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)

	docs.set(`{"DocumentIncarnation":6,"Events":[{"EventId":"b","EventType":"Terminate","Resources":["aks-spot-vmss_3"],"EventStatus":"Scheduled","NotBefore":""}]}`)
	watchtest.Step(t, clk, time.Second)
	got := map[string]notice.Notice{}
	for range 2 {
		n := watchtest.Next(t, out)
		got[n.ID] = n
	}
	if !got["a"].Ended {
		t.Errorf("a: %+v, want Ended", got["a"])
	}
	if b := got["b"]; b.Ended || b.Kind != notice.Termination || !b.Deadline.Equal(start.Add(6*time.Second+5*time.Minute)) {
		t.Errorf("b: %+v, want a termination due 5m after it was seen", b)
	}
}

func TestAcknowledgeRejects(t *testing.T) {
	imds, _, src := setup(t, Config{ProviderID: providerID})
	if err := src.Acknowledge(context.Background(), notice.Notice{Cloud: "aws", ID: "spot/instance-action"}); err == nil {
		t.Error("acknowledged an AWS notice")
	}
	// The service refuses an unknown event; the error says so.
	if err := src.Acknowledge(context.Background(), notice.Notice{Cloud: "azure", ID: "gone"}); err == nil {
		t.Error("acknowledging an unknown event succeeded")
	}
	if len(imds.Acks()) != 0 {
		t.Errorf("acks = %v", imds.Acks())
	}
}

// The document is read every TerminationPollInterval: a Preempt is seen
// within 250 ms by default.
func TestDocumentReadEveryTerminationPollInterval(t *testing.T) {
	imds, clk, src := setup(t, Config{ProviderID: providerID})
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	before := imds.Requests(pathOf(ScheduledEventsPath))
	for range 10 {
		watchtest.Step(t, clk, DefaultTerminationPollInterval)
	}
	if n := imds.Requests(pathOf(ScheduledEventsPath)) - before; n != 10 {
		t.Errorf("%d reads of the document in %v, want 10", n, 10*DefaultTerminationPollInterval)
	}
	imds.AddEvent(azureimds.Event{EventID: "preempt-1", EventType: "Preempt", Resources: []string{"aks-spot-vmss_3"}, NotBefore: clk.Now().Add(30 * time.Second)})
	watchtest.Step(t, clk, DefaultTerminationPollInterval)
	if got := watchtest.Next(t, out); got.ID != "preempt-1" {
		t.Errorf("notice = %+v, want the Preempt one TerminationPollInterval after it appeared", got)
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"bad provider ID":      {ProviderID: "aws:///us-east-1a/i-1"},
		"bad endpoint":         {Endpoint: "http://"},
		"negative backoff":     {MaxBackoff: -time.Second},
		"negative termination": {TerminationPollInterval: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	src, err := New(Config{ProviderID: providerID})
	if err != nil {
		t.Fatal(err)
	}
	if src.Cloud() != notice.CloudAzure || src.vmName != "aks-spot-vmss_3" || src.cfg.TerminationPollInterval != DefaultTerminationPollInterval {
		t.Errorf("source: %+v", src)
	}
	if src, err := New(Config{ProviderID: providerID, PollInterval: 100 * time.Millisecond}); err != nil || src.cfg.TerminationPollInterval != 100*time.Millisecond {
		t.Errorf("PollInterval 100ms: TerminationPollInterval %v, %v; want 100ms", src.cfg.TerminationPollInterval, err)
	}
}

// One malformed event, for this VM or another, must not hide the others: it
// is logged and skipped, and this VM's Preempt is handled.
func TestMalformedEventsAreSkipped(t *testing.T) {
	docs := &docServer{}
	srv := httptest.NewServer(docs)
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk, ProviderID: providerID})
	if err != nil {
		t.Fatal(err)
	}
	docs.set(`{"DocumentIncarnation":3,"Events":[
		{"EventId":"bad-date","EventType":"Freeze","Resources":["aks-spot-vmss_4"],"EventStatus":"Scheduled","NotBefore":"tomorrow"},
		{"EventType":"Reboot","Resources":["aks-spot-vmss_4"]},
		{"EventId":"bad-resources","EventType":"Reboot","Resources":"aks-spot-vmss_4"},
		{"EventId":"bad-duration","EventType":"Redeploy","Resources":["aks-spot-vmss_5"],"DurationInSeconds":"long"},
		null, 7, "event",
		{"EventId":"mine","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["aks-spot-vmss_3"],
		 "EventStatus":"Scheduled","NotBefore":"Wed, 02 Jan 2030 03:04:35 GMT","EventSource":"Platform","DurationInSeconds":-1}]}`)
	ctx, logs := watchtest.LogContext(t)
	out := watchtest.StartContext(t, ctx, src)
	got := watchtest.Next(t, out)
	if got.ID != "mine" || got.Kind != notice.Termination || !got.Deadline.Equal(start.Add(30*time.Second)) {
		t.Errorf("notice = %+v, want this VM's Preempt due at its NotBefore", got)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
	log := logs()
	for _, want := range []string{"Skipping a malformed scheduled event", `index=1`, `eventID="bad-resources"`, `index=4`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}

// A malformed NotBefore does not lose this VM's event: it is taken as due
// after the documented minimum notice, and the problem is logged.
func TestMalformedNotBeforeOfThisVM(t *testing.T) {
	docs := &docServer{}
	srv := httptest.NewServer(docs)
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk, ProviderID: providerID})
	if err != nil {
		t.Fatal(err)
	}
	docs.set(`{"DocumentIncarnation":3,"Events":[{"EventId":"mine","EventType":"Preempt","Resources":["aks-spot-vmss_3"],"EventStatus":"Scheduled","NotBefore":"2030-01-02T03:04:35Z"}]}`)
	ctx, logs := watchtest.LogContext(t)
	out := watchtest.StartContext(t, ctx, src)
	if got := watchtest.Next(t, out); got.ID != "mine" || got.Kind != notice.Termination || !got.Deadline.Equal(start.Add(MinimumNotice[EventPreempt])) {
		t.Errorf("notice = %+v, want a termination due 30s after it was seen", got)
	}
	if log := logs(); !strings.Contains(log, "NotBefore") || !strings.Contains(log, `eventID="mine"`) {
		t.Errorf("the log does not name the bad NotBefore:\n%s", log)
	}
}

// An event of this VM that was valid and is malformed in a later document has
// not ended: its drain must not stop.
func TestEventTurnedMalformedHasNotEnded(t *testing.T) {
	docs := &docServer{}
	srv := httptest.NewServer(docs)
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk, ProviderID: providerID})
	if err != nil {
		t.Fatal(err)
	}
	docs.set(`{"DocumentIncarnation":3,"Events":[{"EventId":"mine","EventType":"Preempt","Resources":["aks-spot-vmss_3"],"NotBefore":"Wed, 02 Jan 2030 03:04:35 GMT"}]}`)
	out := watchtest.Start(t, src)
	if got := watchtest.Next(t, out); got.ID != "mine" || got.Ended {
		t.Fatalf("notice = %+v", got)
	}
	docs.set(`{"DocumentIncarnation":4,"Events":[{"EventId":"mine","EventType":"Preempt","Resources":{"vm":"aks-spot-vmss_3"}}]}`)
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
	docs.set(`{"DocumentIncarnation":5,"Events":[]}`)
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); got.ID != "mine" || !got.Ended {
		t.Errorf("notice = %+v, want Ended once the event is gone", got)
	}
}

// A termination event whose NotBefore is already past is due now; one further
// ahead than any documented notice is due its type's minimum notice after it
// was seen, and logged: waiting for it would leave the pods to go down with
// the VM.
func TestTerminationNotBeforeOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		eventType string
		notBefore time.Time
		want      time.Time
		logged    bool
	}{
		{"preempt in the past", EventPreempt, start.Add(-time.Hour), start, true},
		{"preempt a day ahead", EventPreempt, start.Add(24 * time.Hour), start.Add(MinimumNotice[EventPreempt]), true},
		{"terminate a day ahead", EventTerminate, start.Add(24 * time.Hour), start.Add(MinimumNotice[EventTerminate]), true},
		{"preempt in 30s", EventPreempt, start.Add(30 * time.Second), start.Add(30 * time.Second), false},
		{"terminate in 15m", EventTerminate, start.Add(15 * time.Minute), start.Add(15 * time.Minute), false},
		{"reboot a day ahead: planned maintenance is announced early", EventReboot, start.Add(24 * time.Hour), start.Add(24 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := &docServer{}
			srv := httptest.NewServer(docs)
			defer srv.Close()
			clk := testingclock.NewFakeClock(start)
			src, err := New(Config{Endpoint: srv.URL, Clock: clk, ProviderID: providerID})
			if err != nil {
				t.Fatal(err)
			}
			docs.set(fmt.Sprintf(`{"DocumentIncarnation":3,"Events":[{"EventId":"mine","EventType":%q,"Resources":["aks-spot-vmss_3"],"EventStatus":"Scheduled","NotBefore":%q}]}`,
				tc.eventType, tc.notBefore.UTC().Format(TimeLayout)))
			ctx, logs := watchtest.LogContext(t)
			out := watchtest.StartContext(t, ctx, src)
			got := watchtest.Next(t, out)
			if !got.Deadline.Equal(tc.want) {
				t.Errorf("deadline %v, want %v", got.Deadline, tc.want)
			}
			if logged := strings.Contains(logs(), "NotBefore out of range"); logged != tc.logged {
				t.Errorf("logged %v, want %v:\n%s", logged, tc.logged, logs())
			}
			// The deadline does not move while the document stays the same.
			watchtest.Step(t, clk, 10*time.Second)
			watchtest.None(t, out)
		})
	}
}
