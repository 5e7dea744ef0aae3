package gcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/internal/watchtest"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type env struct {
	md    *gcpmetadata.Server
	mdClk *testingclock.FakeClock // times the emulator's long-polls
	clk   *testingclock.FakeClock // the source's clock
	src   *Source
}

// setup starts an emulator (behind wrap, when not nil) and a Source, each on
// its own fake clock.
func setup(t *testing.T, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	e := &env{mdClk: testingclock.NewFakeClock(start), clk: testingclock.NewFakeClock(start)}
	e.md = gcpmetadata.New(gcpmetadata.Options{Clock: e.mdClk})
	var h http.Handler = e.md
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(e.md.Close)
	src, err := New(Config{Endpoint: srv.URL, Clock: e.clk, LongPollTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.src = src
	return e
}

// idle waits until the source long-polls both keys.
func (e *env) idle(t *testing.T) {
	t.Helper()
	watchtest.Eventually(t, "both keys are long-polled", func() bool {
		return e.md.Waiting(PreemptedPath) == 1 && e.md.Waiting(MaintenanceEventPath) == 1
	})
}

// next returns the next notice, then lets the source's clock run on by a
// PollInterval once the key that answered waits on it: a key's long polls
// start at least PollInterval apart, and the fake clock stands still during
// the emulator's long polls.
func (e *env) next(t *testing.T, out <-chan notice.Notice) notice.Notice {
	t.Helper()
	n := watchtest.Next(t, out)
	watchtest.WaitIdle(t, e.clk)
	e.clk.Step(time.Second)
	return n
}

func TestPreempted(t *testing.T) {
	e := setup(t, nil)
	out := watchtest.Start(t, e.src)
	e.idle(t)
	watchtest.None(t, out)

	e.md.SetPreempted(true)
	got := e.next(t, out)
	want := notice.Notice{Cloud: "gcp", Kind: notice.Termination, ID: PreemptedID, Action: "preempted",
		Deadline: start.Add(30 * time.Second), Detail: "GCE preempted the instance; it stops by 2030-01-02T03:04:35Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}

	// The long-polls time out and answer the same values: nothing is resent.
	e.idle(t)
	before := e.md.Requests(PreemptedPath)
	e.clk.Step(10 * time.Second) // the deadline stays the first sighting's
	e.mdClk.Step(30 * time.Second)
	watchtest.Eventually(t, "the source long-polls again", func() bool {
		return e.md.Requests(PreemptedPath) > before && e.md.Waiting(PreemptedPath) == 1 && e.md.Waiting(MaintenanceEventPath) == 1
	})
	watchtest.None(t, out)
}

func TestMaintenanceEvent(t *testing.T) {
	e := setup(t, nil)
	out := watchtest.Start(t, e.src)
	e.idle(t)

	e.md.SetMaintenanceEvent(MaintenanceMigrate)
	got := e.next(t, out)
	want := notice.Notice{Cloud: "gcp", Kind: notice.Maintenance, ID: MaintenanceEventID, Action: MaintenanceMigrate,
		Deadline: start.Add(time.Minute), Detail: "GCE host maintenance MIGRATE_ON_HOST_MAINTENANCE starts by 2030-01-02T03:05:05Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}

	e.clk.Step(5 * time.Second)
	e.md.SetMaintenanceEvent(MaintenanceTerminate)
	if got := e.next(t, out); got.Action != MaintenanceTerminate || !got.Deadline.Equal(want.Deadline) || got.Ended {
		t.Errorf("changed to terminate: %+v", got)
	}

	e.md.SetMaintenanceEvent(MaintenanceNone)
	if got := e.next(t, out); !got.Ended || got.Action != MaintenanceTerminate || got.ID != MaintenanceEventID {
		t.Errorf("back to NONE: %+v, want Ended", got)
	}
	e.idle(t)
	watchtest.None(t, out)
}

// A notice that is already up when the agent starts is reported at once.
func TestNoticeAtStart(t *testing.T) {
	e := setup(t, nil)
	e.md.SetPreempted(true)
	out := watchtest.Start(t, e.src)
	if got := watchtest.Next(t, out); got.ID != PreemptedID {
		t.Errorf("notice = %+v", got)
	}
}

func TestReconnectsWithBackoff(t *testing.T) {
	var failures atomic.Int32
	failures.Store(3)
	e := setup(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == PreemptedPath && failures.Add(-1) >= 0 {
				w.Header().Set(FlavorHeader, FlavorGoogle)
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	e.md.SetPreempted(true)
	out := watchtest.Start(t, e.src)
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		watchtest.WaitIdle(t, e.clk)
		watchtest.None(t, out)
		e.clk.Step(wait) // exactly the backoff: 1s, 2s, 4s
	}
	if got := watchtest.Next(t, out); got.ID != PreemptedID {
		t.Errorf("notice = %+v", got)
	}
}

// watchUntil runs Watch and waits for a notice, stepping the source's clock
// by step whenever the source waits on it. It fails the test at once if Watch
// returns: a DaemonSet would restart the agent through the notice.
func watchUntil(t *testing.T, src *Source, clk *testingclock.FakeClock, step time.Duration) notice.Notice {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan notice.Notice, 16)
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v after the context ended, want nil", err)
		}
	}()
	deadline := time.Now().Add(watchtest.Timeout)
	for time.Now().Before(deadline) {
		select {
		case n := <-out:
			return n
		case err := <-done:
			done <- err
			t.Fatalf("Watch returned %v before the notice", err)
		default:
		}
		if clk.HasWaiters() {
			clk.Step(step)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no notice within %v", watchtest.Timeout)
	return notice.Notice{}
}

// An answer without Metadata-Flavor: Google (a proxy, a captive portal, a
// restarting server) is a failed poll, retried with backoff: the agent must
// not exit, and sees the notice once the server answers properly.
func TestAnswerWithoutFlavorIsAFailedPoll(t *testing.T) {
	var bad atomic.Int32
	bad.Store(2)
	e := setup(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == PreemptedPath && bad.Add(-1) >= 0 {
				w.Header().Set("ETag", "abc")
				_, _ = io.WriteString(w, "FALSE")
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	e.md.SetPreempted(true)
	if got := watchUntil(t, e.src, e.clk, time.Second); got.ID != PreemptedID || got.Kind != notice.Termination {
		t.Errorf("notice = %+v, want the preemption", got)
	}
}

// A server that never sends the header is retried with backoff, never
// faster, until the context ends; Watch then returns nil.
func TestNotTheMetadataServerIsRetriedWithBackoff(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("ETag", "abc")
		_, _ = io.WriteString(w, "FALSE")
	}))
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk, MaxBackoff: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, logs := watchtest.LogContext(t)
	out := watchtest.StartContext(t, ctx, src)
	bothWait := func() {
		watchtest.Eventually(t, "both keys wait on the clock", func() bool { return clk.Waiters() == 2 })
	}
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		bothWait()
		clk.Step(wait)
	}
	bothWait()
	// Two keys: a first read each, then one read per backoff wait.
	if n := requests.Load(); n != 2*5 {
		t.Errorf("%d requests over 11s of backoff (1s, 2s, 4s, 4s), want 10", n)
	}
	watchtest.None(t, out)
	if log := logs(); !strings.Contains(log, "Metadata-Flavor: Google") {
		t.Errorf("the log does not name the missing header:\n%s", log)
	}
}

// A server that answers every wait_for_change at once with an unchanged ETag
// must not make the agent spin: a key's long polls start at least
// PollInterval apart. The server answers at once 100 times, then with errors
// (retried with backoff), so that an unpaced loop shows as a count above the
// bound rather than a hung test.
func TestLongPollIsPaced(t *testing.T) {
	var requests, longPolls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(FlavorHeader, FlavorGoogle)
		if requests.Add(1) > 100 {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Query().Get("wait_for_change") == "true" {
			longPolls.Add(1)
		}
		w.Header().Set("ETag", "same")
		_, _ = io.WriteString(w, "FALSE")
	}))
	defer srv.Close()
	clk := testingclock.NewFakeClock(start)
	src, err := New(Config{Endpoint: srv.URL, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	k := key{path: PreemptedPath, id: PreemptedID, notice: src.preempted}
	go func() { src.watchKey(ctx, k, make(chan notice.Notice, 16)); close(done) }()
	defer func() { cancel(); <-done }()
	const seconds = 10
	for range seconds {
		watchtest.WaitIdle(t, clk)
		clk.Step(time.Second)
	}
	watchtest.WaitIdle(t, clk)
	// The first read, the first long poll at once, then one a second.
	if n := requests.Load(); n > 2+seconds {
		t.Errorf("%d requests in %d seconds, want at most %d (one long poll a second)", n, seconds, 2+seconds)
	}
	if n := longPolls.Load(); n < seconds {
		t.Errorf("%d long polls in %d seconds: the key is no longer watched", n, seconds)
	}
}

// Every request carries Metadata-Flavor: Google: the emulator refuses others.
func TestSendsTheFlavorHeader(t *testing.T) {
	e := setup(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(FlavorHeader) != FlavorGoogle {
				t.Errorf("%s %s without Metadata-Flavor: Google", r.Method, r.URL)
			}
			h.ServeHTTP(w, r)
		})
	})
	watchtest.Start(t, e.src)
	e.idle(t)
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"bad endpoint":             {Endpoint: "ftp://x"},
		"fractional long-poll":     {LongPollTimeout: 1500 * time.Millisecond},
		"negative request timeout": {RequestTimeout: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	src, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Cloud() != notice.CloudGCP || src.cfg.LongPollTimeout != DefaultLongPollTimeout {
		t.Errorf("defaults: %+v", src.cfg)
	}
}
