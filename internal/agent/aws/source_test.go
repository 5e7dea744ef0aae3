package aws

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/internal/watchtest"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/emulator/awsimds"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// setup starts an emulator behind handler (nil: the emulator itself) and a
// Source on a fake clock.
func setup(t *testing.T, cfg Config, wrap func(http.Handler) http.Handler) (*awsimds.Server, *testingclock.FakeClock, *Source) {
	t.Helper()
	clk := testingclock.NewFakeClock(start)
	imds := awsimds.New(awsimds.Options{Clock: clk})
	var h http.Handler = imds
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.Endpoint = srv.URL
	cfg.Clock = clk
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return imds, clk, src
}

func TestSpotInstanceAction(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	watchtest.None(t, out)

	at := start.Add(2 * time.Minute)
	imds.SetInstanceAction("terminate", at)
	watchtest.Step(t, clk, time.Second)
	got := watchtest.Next(t, out)
	want := notice.Notice{Cloud: "aws", Kind: notice.Termination, ID: InstanceActionID, Action: "terminate", Deadline: at,
		Detail: "EC2 spot instance-action: terminate at 2030-01-02T03:06:05Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}

	// Unchanged: not sent again.
	for range 3 {
		watchtest.Step(t, clk, time.Second)
	}
	watchtest.None(t, out)

	// Changed: sent again.
	imds.SetInstanceAction("stop", at)
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); got.Action != "stop" || got.Ended {
		t.Errorf("after the change: %+v, want action stop", got)
	}

	// Withdrawn: Ended.
	imds.ClearInstanceAction()
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); !got.Ended || got.ID != InstanceActionID || got.Action != "stop" {
		t.Errorf("after the withdrawal: %+v, want Ended", got)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
	if n := imds.Unauthorized(); n != 0 {
		t.Errorf("%d requests were refused for want of a token", n)
	}
	if n := imds.Requests(awsimds.TokenPath); n != 1 {
		t.Errorf("%d token requests, want 1 for a 6h token", n)
	}
}

// The items that carry a termination are read every
// TerminationPollInterval, the others every PollInterval: a spot notice is
// seen within 200 ms by default, for no more reads of the advisory items.
func TestTerminationItemsReadMoreOften(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	reads := func() (action, lifecycle, rebalance, scheduled int) {
		return imds.Requests(awsimds.InstanceActionPath), imds.Requests(awsimds.TargetLifecycleStatePath),
			imds.Requests(awsimds.RebalancePath), imds.Requests(awsimds.ScheduledEventsPath)
	}
	a0, l0, r0, s0 := reads()
	for range 10 {
		watchtest.Step(t, clk, DefaultTerminationPollInterval)
	}
	a, l, r, s := reads()
	if a-a0 != 10 || l-l0 != 10 || r-r0 != 2 || s-s0 != 2 {
		t.Errorf("in 2s: %d instance-action, %d target-lifecycle-state, %d rebalance and %d scheduled-event reads; want 10, 10, 2 and 2",
			a-a0, l-l0, r-r0, s-s0)
	}
	watchtest.None(t, out)

	at := clk.Now().Add(2 * time.Minute)
	imds.SetInstanceAction("terminate", at)
	watchtest.Step(t, clk, DefaultTerminationPollInterval)
	if got := watchtest.Next(t, out); got.ID != InstanceActionID || got.Deadline != at {
		t.Errorf("notice = %+v, want the instance-action one TerminationPollInterval after it appeared", got)
	}
}

func TestRebalanceRecommendation(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	imds.SetRebalance(start.Add(-time.Minute))
	out := watchtest.Start(t, src)
	got := watchtest.Next(t, out)
	want := notice.Notice{Cloud: "aws", Kind: notice.Rebalance, ID: RebalanceID, Action: "rebalance",
		Detail: "EC2 rebalance recommendation issued at 2030-01-02T03:03:05Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
}

func TestScheduledEvents(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)

	imds.SetScheduledEvents() // "[]": nothing
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)

	reboot := awsimds.ScheduledEvent{Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-0d59937288b749b32",
		NotBefore: start.Add(time.Hour), NotAfter: start.Add(2 * time.Hour), State: "active"}
	imds.SetScheduledEvents(reboot)
	watchtest.Step(t, clk, time.Second)
	got := watchtest.Next(t, out)
	want := notice.Notice{Cloud: "aws", Kind: notice.Maintenance, ID: reboot.EventID, Action: "system-reboot", Deadline: reboot.NotBefore,
		Detail: "EC2 scheduled event instance-event-0d59937288b749b32 system-reboot (active) from 2030-01-02T04:04:05Z to 2030-01-02T05:04:05Z: scheduled reboot"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)

	// Canceled: sent again with Ended, then never again.
	reboot.State = "canceled"
	imds.SetScheduledEvents(reboot)
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); !got.Ended || got.ID != reboot.EventID {
		t.Errorf("after cancel: %+v, want Ended", got)
	}
	imds.ClearScheduledEvents() // 404: nothing
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)

	// An active event that disappears ends too.
	stop := awsimds.ScheduledEvent{Code: "instance-stop", EventID: "instance-event-2", NotBefore: start.Add(time.Hour), State: "active"}
	imds.SetScheduledEvents(stop)
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); got.Ended || got.ID != stop.EventID {
		t.Errorf("new event: %+v", got)
	}
	imds.SetScheduledEvents()
	watchtest.Step(t, clk, time.Second)
	if got := watchtest.Next(t, out); !got.Ended || got.ID != stop.EventID {
		t.Errorf("removed event: %+v, want Ended", got)
	}
}

func TestTargetLifecycleState(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	imds.SetTargetLifecycleState("InService")
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	watchtest.None(t, out)

	imds.SetTargetLifecycleState("Terminated")
	watchtest.Step(t, clk, time.Second)
	got := watchtest.Next(t, out)
	seen := start.Add(time.Second)
	want := notice.Notice{Cloud: "aws", Kind: notice.Termination, ID: TargetLifecycleStateID, Action: "Terminated",
		Deadline: seen.Add(TargetLifecycleGrace), Detail: "EC2 Auto Scaling target lifecycle state: Terminated"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}
	// The deadline counts from the first sighting: later polls change nothing.
	watchtest.Step(t, clk, time.Second)
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
}

func TestTokenRenewedBeforeExpiry(t *testing.T) {
	imds, clk, src := setup(t, Config{TokenTTL: 10 * time.Second}, nil)
	out := watchtest.Start(t, src)
	watchtest.Step(t, clk, time.Second)
	if n := imds.Requests(awsimds.TokenPath); n != 1 {
		t.Fatalf("%d token requests after 1s, want 1", n)
	}
	// Four fifths of the TTL: renewed before the emulator would refuse it.
	watchtest.Step(t, clk, 7*time.Second)
	if n := imds.Requests(awsimds.TokenPath); n != 2 {
		t.Errorf("%d token requests after 8s of a 10s token, want 2", n)
	}
	if n := imds.Unauthorized(); n != 0 {
		t.Errorf("%d requests refused: the token was not renewed in time", n)
	}
	watchtest.None(t, out)
}

func TestTokenRenewedOn401(t *testing.T) {
	imds, clk, src := setup(t, Config{}, nil)
	out := watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)

	imds.ExpireTokens()
	imds.SetInstanceAction("terminate", start.Add(2*time.Minute))
	watchtest.Step(t, clk, time.Second)
	// The round that met the 401 renewed the token, retried, and saw the notice.
	if got := watchtest.Next(t, out); got.ID != InstanceActionID {
		t.Errorf("notice = %+v", got)
	}
	if n := imds.Unauthorized(); n != 1 {
		t.Errorf("%d requests refused, want exactly the first after the expiry", n)
	}
	if n := imds.Requests(awsimds.TokenPath); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

func TestTransientErrorsAreRetried(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	imds, clk, src := setup(t, Config{MaxBackoff: 4 * time.Second}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failing.Load() && r.URL.Path == InstanceActionPath {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	imds.SetInstanceAction("terminate", start.Add(2*time.Minute))
	imds.SetRebalance(start)
	out := watchtest.Start(t, src)
	// The item that answers is reported despite the other's error.
	if got := watchtest.Next(t, out); got.ID != RebalanceID {
		t.Fatalf("notice = %+v, want the rebalance recommendation", got)
	}
	watchtest.Step(t, clk, 4*time.Second) // at most the backoff cap
	watchtest.None(t, out)
	failing.Store(false)
	watchtest.Step(t, clk, 4*time.Second)
	if got := watchtest.Next(t, out); got.ID != InstanceActionID {
		t.Errorf("notice = %+v, want the instance-action once the service recovers", got)
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"relative endpoint":      {Endpoint: "169.254.169.254"},
		"endpoint with query":    {Endpoint: "http://x/?a=b"},
		"negative poll interval": {PollInterval: -time.Second},
		"TTL too long":           {TokenTTL: 7 * time.Hour},
		"TTL not whole seconds":  {TokenTTL: 1500 * time.Millisecond},
		"negative backoff":       {MaxBackoff: -1},
		"negative termination":   {TerminationPollInterval: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	src, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Cloud() != notice.CloudAWS || src.endpoint != "http://169.254.169.254" || src.cfg.PollInterval != time.Second ||
		src.cfg.RequestTimeout != 2*time.Second || src.cfg.TokenTTL != MaxTokenTTL || src.cfg.TerminationPollInterval != DefaultTerminationPollInterval {
		t.Errorf("defaults: %+v", src.cfg)
	}
	// Never above PollInterval.
	if src, err := New(Config{PollInterval: 100 * time.Millisecond}); err != nil || src.cfg.TerminationPollInterval != 100*time.Millisecond {
		t.Errorf("PollInterval 100ms: TerminationPollInterval %v, %v; want 100ms", src.cfg.TerminationPollInterval, err)
	}
}

// An instance-action time far from the documented two minutes is logged and
// made sane: a past time means now, a time more than MaxInstanceActionLead
// away is taken as InstanceActionNotice after the notice was seen. Either
// deadline is kept while the document does not change.
func TestInstanceActionTimeOutOfRange(t *testing.T) {
	cases := []struct {
		name    string
		at      time.Duration // from the first sighting
		want    time.Duration // deadline, from the first sighting
		wantLog string
	}{
		{name: "documented two minutes", at: 2 * time.Minute, want: 2 * time.Minute},
		{name: "at the bound", at: MaxInstanceActionLead, want: MaxInstanceActionLead},
		{name: "an hour ago", at: -time.Hour, want: 0, wantLog: "in the past"},
		{name: "a second ago", at: -time.Second, want: 0, wantLog: "in the past"},
		{name: "past the bound", at: MaxInstanceActionLead + time.Second, want: InstanceActionNotice, wantLog: "too far ahead"},
		{name: "in a year", at: 365 * 24 * time.Hour, want: InstanceActionNotice, wantLog: "too far ahead"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			imds, clk, src := setup(t, Config{}, nil)
			ctx, logs := watchtest.LogContext(t)
			out := watchtest.StartContext(t, ctx, src)
			watchtest.WaitIdle(t, clk)
			seen := start.Add(time.Second)
			imds.SetInstanceAction("stop", seen.Add(tc.at))
			watchtest.Step(t, clk, time.Second)
			got := watchtest.Next(t, out)
			if got.ID != InstanceActionID || got.Kind != notice.Termination || !got.Deadline.Equal(seen.Add(tc.want)) {
				t.Errorf("notice = %+v, want a termination due at %v", got, seen.Add(tc.want))
			}
			// Later polls of the same document keep the deadline: nothing is resent.
			watchtest.Step(t, clk, time.Second)
			watchtest.Step(t, clk, time.Second)
			watchtest.None(t, out)
			log := logs()
			switch {
			case tc.wantLog == "" && strings.Contains(log, "instance-action time"):
				t.Errorf("an ordinary time is logged as odd:\n%s", log)
			case tc.wantLog != "" && strings.Count(log, tc.wantLog) != 1:
				t.Errorf("the log does not say %q once:\n%s", tc.wantLog, log)
			}
			if tc.wantLog != "" && !strings.Contains(got.Detail, tc.wantLog) {
				t.Errorf("detail %q does not say %q", got.Detail, tc.wantLog)
			}
		})
	}
}

// One malformed scheduled event does not hide the others: it is logged and
// skipped; an event with an unreadable date is kept without it.
func TestMalformedScheduledEventsAreSkipped(t *testing.T) {
	var body atomic.Value
	body.Store(`[
		{"Code":"system-reboot","EventId":"instance-event-good","NotBefore":"21 Jan 2030 09:00:43 GMT","State":"active"},
		{"Code":"instance-stop","State":"active"},
		{"Code":"instance stop","EventId":"instance-event-spaces"},
		7, null,
		{"Code":"instance-retirement","EventId":"instance-event-bad-date","NotBefore":"tomorrow","State":"active"}]`)
	_, clk, src := setup(t, Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == ScheduledEventsPath {
				_, _ = io.WriteString(w, body.Load().(string))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx, logs := watchtest.LogContext(t)
	out := watchtest.StartContext(t, ctx, src)
	got := map[string]notice.Notice{}
	for range 2 {
		n := watchtest.Next(t, out)
		got[n.ID] = n
	}
	if n, ok := got["instance-event-good"]; !ok || n.Kind != notice.Maintenance || !n.Deadline.Equal(time.Date(2030, 1, 21, 9, 0, 43, 0, time.UTC)) {
		t.Errorf("good event: %+v, want maintenance at its NotBefore", n)
	}
	if n, ok := got["instance-event-bad-date"]; !ok || n.Kind != notice.Maintenance || !n.Deadline.IsZero() || n.Ended {
		t.Errorf("event with a bad date: %+v, want maintenance with no deadline", n)
	}
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
	log := logs()
	for _, want := range []string{"Skipping a malformed scheduled event", "index=1", "index=2", `eventID="instance-event-spaces"`, "index=3", "index=4", `eventID="instance-event-bad-date"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}

	// The good event turns malformed: it has not ended for that.
	body.Store(`[{"Code":"system-reboot","EventId":"instance-event-good","NotBefore":"someday","State":7},
		{"Code":"instance-retirement","EventId":"instance-event-bad-date","NotBefore":"tomorrow","State":"active"}]`)
	watchtest.Step(t, clk, time.Second)
	watchtest.None(t, out)
	body.Store(`[]`)
	watchtest.Step(t, clk, time.Second)
	for range 2 {
		if n := watchtest.Next(t, out); !n.Ended {
			t.Errorf("%+v, want Ended once the events are gone", n)
		}
	}
}
