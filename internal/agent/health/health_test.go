package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/notice"
)

const (
	tokenPath  = "/latest/api/token"
	actionPath = "/latest/meta-data/spot/instance-action"
	eventsPath = "/latest/meta-data/events/maintenance/scheduled"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// newMonitor returns a Monitor of AWS's paths with threshold, on a fake
// clock, and the registry of its metrics.
func newMonitor(t *testing.T, threshold int) (*Monitor, *testingclock.FakeClock, *prometheus.Registry) {
	t.Helper()
	clk := testingclock.NewFakeClock(start)
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	m.MustRegister(reg)
	mon := NewMonitor("aws", threshold, clk, m, logr.Discard())
	mon.Expect(notice.Paths{Notices: []string{actionPath, eventsPath}, Others: []string{tokenPath}})
	return mon, clk, reg
}

// metrics returns the monitor's series, one a line, as Prometheus reads them.
func metrics(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			lines = append(lines, strings.TrimPrefix(f.GetName(), "spotter_agent_metadata_")+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	return strings.Join(lines, "\n")
}

func wantReady(t *testing.T, mon *Monitor, ready bool, contains ...string) {
	t.Helper()
	err := mon.Ready()
	if (err == nil) != ready {
		t.Fatalf("Ready() = %v, want ready %v", err, ready)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("Ready() = %v, want it to contain %q", err, c)
		}
	}
}

// Not ready until each notice path was read; then not ready after exactly
// threshold failed reads in a row of one path, counted by path; ready again
// after one good read, which dates the path's last success.
func TestReadinessFollowsReads(t *testing.T) {
	refused := errors.New("connection refused")
	mon, clk, reg := newMonitor(t, 3)
	wantReady(t, mon, false, actionPath+": not read yet", eventsPath+": not read yet")
	if got, want := metrics(t, reg), `errors_total{cloud=aws,path=/latest/api/token} 0
errors_total{cloud=aws,path=/latest/meta-data/events/maintenance/scheduled} 0
errors_total{cloud=aws,path=/latest/meta-data/spot/instance-action} 0
last_success_timestamp_seconds{cloud=aws,path=/latest/meta-data/events/maintenance/scheduled} 0
last_success_timestamp_seconds{cloud=aws,path=/latest/meta-data/spot/instance-action} 0`; got != want {
		t.Errorf("metrics before any read:\n%s\nwant\n%s", got, want)
	}

	mon.ObserveRead(tokenPath, nil)
	mon.ObserveRead(actionPath, nil)
	wantReady(t, mon, false, eventsPath+": not read yet")
	mon.ObserveRead(eventsPath, refused)
	wantReady(t, mon, false, eventsPath+": not read yet, 1 reads failed, the last: connection refused")
	mon.ObserveRead(eventsPath, nil)
	wantReady(t, mon, true)

	for i := 1; i <= 3; i++ {
		clk.Step(time.Second)
		mon.ObserveRead(actionPath, refused)
		mon.ObserveRead(eventsPath, nil) // another path's good reads do not help
		if i < 3 {
			wantReady(t, mon, true)
		}
	}
	wantReady(t, mon, false, actionPath+": 3 reads in a row failed (threshold 3), the last: connection refused")
	if got := testutil.ToFloat64(mon.metrics.errors.WithLabelValues("aws", actionPath)); got != 3 {
		t.Errorf("errors of %s = %v, want 3", actionPath, got)
	}

	clk.Step(time.Second)
	mon.ObserveRead(actionPath, nil)
	wantReady(t, mon, true)
	now := float64(clk.Now().Unix())
	if got := testutil.ToFloat64(mon.metrics.lastSuccess.WithLabelValues("aws", actionPath)); got != now {
		t.Errorf("last success of %s = %v, want %v", actionPath, got, now)
	}

	// The others count too; they have no last success: they are read every
	// few hours by design.
	for range 3 {
		mon.ObserveRead(tokenPath, refused)
	}
	wantReady(t, mon, false, tokenPath+": 3 reads in a row failed")
	mon.ObserveRead(tokenPath, nil)
	wantReady(t, mon, true)
	if got := metrics(t, reg); strings.Contains(got, "last_success_timestamp_seconds{cloud=aws,path=/latest/api/token}") {
		t.Errorf("the token has a last success:\n%s", got)
	}
}

// A threshold of 1 makes a single failed read count.
func TestThresholdOne(t *testing.T) {
	mon, _, _ := newMonitor(t, 1)
	mon.ObserveRead(actionPath, nil)
	mon.ObserveRead(eventsPath, nil)
	wantReady(t, mon, true)
	mon.ObserveRead(eventsPath, errors.New("HTTP 500"))
	wantReady(t, mon, false, eventsPath+": 1 reads in a row failed (threshold 1)")
}

// /readyz answers 503 with the reason while not ready, 200 ok once ready;
// /healthz answers 200 ok throughout: restarting a blind agent would not
// make the metadata service answer.
func TestHandler(t *testing.T) {
	mon, _, _ := newMonitor(t, 3)
	srv := httptest.NewServer(Handler(mon.Ready))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, actionPath+": not read yet") {
		t.Errorf("/readyz before any read: %d %q", code, body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	mon.ObserveRead(actionPath, nil)
	mon.ObserveRead(eventsPath, nil)
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz once read: %d %q", code, body)
	}
}
