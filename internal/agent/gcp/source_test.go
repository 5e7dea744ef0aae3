package gcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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

func TestPreempted(t *testing.T) {
	e := setup(t, nil)
	out := watchtest.Start(t, e.src)
	e.idle(t)
	watchtest.None(t, out)

	e.md.SetPreempted(true)
	got := watchtest.Next(t, out)
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
	got := watchtest.Next(t, out)
	want := notice.Notice{Cloud: "gcp", Kind: notice.Maintenance, ID: MaintenanceEventID, Action: MaintenanceMigrate,
		Deadline: start.Add(time.Minute), Detail: "GCE host maintenance MIGRATE_ON_HOST_MAINTENANCE starts by 2030-01-02T03:05:05Z"}
	if got != want {
		t.Errorf("notice = %+v\nwant %+v", got, want)
	}

	e.clk.Step(5 * time.Second)
	e.md.SetMaintenanceEvent(MaintenanceTerminate)
	if got := watchtest.Next(t, out); got.Action != MaintenanceTerminate || !got.Deadline.Equal(want.Deadline) || got.Ended {
		t.Errorf("changed to terminate: %+v", got)
	}

	e.md.SetMaintenanceEvent(MaintenanceNone)
	if got := watchtest.Next(t, out); !got.Ended || got.Action != MaintenanceTerminate || got.ID != MaintenanceEventID {
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

func TestNotTheMetadataServer(t *testing.T) {
	// Answers like GCP, but without Metadata-Flavor: Google.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", "abc")
		_, _ = io.WriteString(w, "FALSE")
	}))
	defer srv.Close()
	src, err := New(Config{Endpoint: srv.URL, Clock: testingclock.NewFakeClock(start)})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, watchtest.Timeout)
	defer cancel()
	err = src.Watch(ctx, make(chan notice.Notice, 1))
	if !errors.Is(err, ErrNotMetadataServer) {
		t.Errorf("Watch = %v, want ErrNotMetadataServer", err)
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
