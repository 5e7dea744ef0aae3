package azure

import (
	"context"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/internal/watchtest"
)

// Every read is told to the observer by its path without the query: the VM's
// name until it is read, then the document every poll. A service that
// refuses every read fails each of them; once it answers again, the reads
// are good.
func TestReadsAreObserved(t *testing.T) {
	const name, doc = "/metadata/instance/compute/name", "/metadata/scheduledevents"
	reads := &watchtest.Reads{}
	imds, clk, src := setup(t, Config{Observer: reads}) // no provider ID: the name is read
	if got := src.Paths(); strings.Join(got.Notices, ",") != doc || strings.Join(got.Others, ",") != name {
		t.Errorf("Paths() = %+v", got)
	}
	imds.RefuseReads(true)
	watchtest.Start(t, src)
	watchtest.WaitIdle(t, clk)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if got, want := reads.Take(false), name+" failed\n"+name+" failed"; got != want {
		t.Fatalf("reads while refused:\n%s\nwant\n%s", got, want)
	}

	imds.RefuseReads(false)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if got, want := reads.Take(false), name+" ok\n"+doc+" ok"; got != want {
		t.Fatalf("reads once the service answers:\n%s\nwant\n%s", got, want)
	}
	imds.RefuseReads(true)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if got, want := reads.Take(false), doc+" failed"; got != want {
		t.Errorf("reads once refused again:\n%s\nwant\n%s (the name is known)", got, want)
	}
}

// Probe reads the VM's name (when no provider ID gives it) and the document
// once, and names the URL of the read that failed.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	imds, _, src := setup(t, Config{})
	if err := src.Probe(ctx); err != nil {
		t.Fatalf("Probe of a service that answers: %v", err)
	}
	imds.RefuseReads(true)
	if err := src.Probe(ctx); err == nil || !strings.HasPrefix(err.Error(), "reading "+src.endpoint+VMNamePath+": ") {
		t.Errorf("Probe of a refusing service: %v, want it to name the VM name's URL", err)
	}
	imds, _, src = setup(t, Config{ProviderID: providerID})
	imds.RefuseReads(true)
	if err := src.Probe(ctx); err == nil || !strings.HasPrefix(err.Error(), "reading "+src.endpoint+ScheduledEventsPath+": ") {
		t.Errorf("Probe of a refusing service, the VM named by the provider ID: %v, want it to name the document's URL", err)
	}
}
