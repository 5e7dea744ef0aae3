package aws

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/internal/watchtest"
)

// allItems is each item's path followed by outcome, one a line, in the order
// of a round.
func allItems(outcome string) string {
	var lines []string
	for _, it := range items {
		lines = append(lines, it.path+" "+outcome)
	}
	return strings.Join(lines, "\n")
}

// Every read is told to the observer by its path: the token when one is asked
// for, each item every round (a 404, an absent item, is a good read). A
// service that refuses every read fails each item's read, and the reads are
// good again once it answers.
func TestReadsAreObserved(t *testing.T) {
	reads := &watchtest.Reads{}
	imds, clk, src := setup(t, Config{Observer: reads}, nil)
	watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	if got, want := reads.Take(false), TokenPath+" ok\n"+allItems("ok"); got != want {
		t.Fatalf("first round's reads:\n%s\nwant\n%s", got, want)
	}

	imds.RefuseReads(true)
	for round := range 3 {
		watchtest.Step(t, clk, watch.DefaultMaxBackoff)
		if got, want := reads.Take(false), allItems("failed"); got != want {
			t.Fatalf("refused round %d's reads:\n%s\nwant\n%s (the token is still valid)", round+1, got, want)
		}
	}
	if imds.Refused() == 0 {
		t.Error("the emulator refused nothing")
	}

	imds.RefuseReads(false)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if got, want := reads.Take(false), allItems("ok"); got != want {
		t.Errorf("reads once the service answers:\n%s\nwant\n%s", got, want)
	}
}

// A service out of reach from the start fails the token's request, every
// round, and no item is read without a token.
func TestTokenRefusedIsObserved(t *testing.T) {
	reads := &watchtest.Reads{}
	imds, clk, src := setup(t, Config{Observer: reads}, nil)
	imds.RefuseReads(true)
	watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if got, want := reads.Take(false), TokenPath+" failed\n"+TokenPath+" failed"; got != want {
		t.Errorf("reads:\n%s\nwant\n%s", got, want)
	}
}

// Probe reads the token and every item once and names the URL of each read
// that failed.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	imds, _, src := setup(t, Config{RequestTimeout: 5 * time.Second}, nil)
	if err := src.Probe(ctx); err != nil {
		t.Fatalf("Probe of a service that answers: %v", err)
	}
	imds.RefuseReads(true)
	err := src.Probe(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "reading "+src.endpoint+TokenPath+": ") {
		t.Errorf("Probe of a refusing service: %v, want it to name the token's URL first", err)
	}

	// One item refused: only its URL is named.
	_, _, src = setup(t, Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == InstanceActionPath {
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	err = src.Probe(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "reading "+src.endpoint+InstanceActionPath+": ") || strings.Count(err.Error(), "reading ") != 1 {
		t.Errorf("Probe with spot/instance-action refused: %v, want only its URL named", err)
	}
}
