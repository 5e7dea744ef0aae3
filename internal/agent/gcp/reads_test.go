package gcp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/agent/internal/watchtest"
)

// both is a read of each key with outcome, sorted: the keys are read
// concurrently.
func both(outcome string) string {
	return MaintenanceEventPath + " " + outcome + "\n" + PreemptedPath + " " + outcome
}

// Every read of a key is told to the observer: the first reads, and a long
// poll when it returns. A server that stops answering fails the long polls
// in flight and every retry; once it answers again, the next read is at
// once, not a long poll, so that the good read is told without waiting for
// the long poll's timeout.
func TestReadsAreObserved(t *testing.T) {
	e := setup(t, nil)
	reads := &watchtest.Reads{}
	e.src.cfg.Observer = reads
	watchtest.Start(t, e.src)
	e.idle(t)
	if got := reads.Take(true); got != both("ok") {
		t.Fatalf("first reads:\n%s\nwant\n%s", got, both("ok"))
	}

	e.md.RefuseReads(true) // cuts the long polls in flight
	for round := range 3 {
		watchtest.Eventually(t, "both keys' reads fail", func() bool { return reads.Count() == 2 && e.clk.Waiters() == 2 })
		if got := reads.Take(true); got != both("failed") {
			t.Fatalf("refused round %d:\n%s\nwant\n%s", round+1, got, both("failed"))
		}
		e.clk.Step(DefaultLongPollTimeout) // past any backoff
	}

	e.md.RefuseReads(false)
	watchtest.Eventually(t, "both keys read again", func() bool { return reads.Count() == 2 })
	if got := reads.Take(true); got != both("ok") {
		t.Errorf("reads once the server answers:\n%s\nwant\n%s", got, both("ok"))
	}
	e.idle(t) // and long-polled again
}

// Probe reads each key once and names the URL of each read that failed.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	if err := e.src.Probe(ctx); err != nil {
		t.Fatalf("Probe of a server that answers: %v", err)
	}
	e.md.RefuseReads(true)
	err := e.src.Probe(ctx)
	for _, p := range []string{PreemptedPath, MaintenanceEventPath} {
		if err == nil || !strings.Contains(err.Error(), "reading "+e.src.endpoint+p+": ") {
			t.Errorf("Probe of a refusing server: %v, want it to name %s", err, p)
		}
	}

	// instance/preempted not served, as the GKE metadata server does for a
	// pod with Workload Identity: only its URL is named.
	e = setup(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == PreemptedPath {
				w.Header().Set(FlavorHeader, FlavorGoogle)
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	err = e.src.Probe(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "reading "+e.src.endpoint+PreemptedPath+": ") || strings.Count(err.Error(), "reading ") != 1 {
		t.Errorf("Probe with instance/preempted not served: %v, want only its URL named", err)
	}
}
