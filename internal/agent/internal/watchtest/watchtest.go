// Package watchtest runs a notice.Source in a test: it starts Watch on a
// buffered channel, steps a fake clock once the source waits on it, and
// receives notices with a bounded wait. Tests only; it is not linked into the
// agent.
package watchtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/notice"
)

// Timeout bounds every wait of this package; it is a safety net against a
// hung test, never a timing assertion.
const Timeout = 20 * time.Second

// Start runs src.Watch until the test ends, and then checks that it returned
// nil. The channel is buffered so that the source never blocks on it.
func Start(t testing.TB, src notice.Source) <-chan notice.Notice {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return StartContext(t, ctx, src)
}

// StartContext is Start with the context (and so the logger) ctx.
func StartContext(t testing.TB, ctx context.Context, src notice.Source) <-chan notice.Notice {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan notice.Notice, 64)
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v, want nil after the context ended", err)
			}
		case <-time.After(Timeout):
			t.Errorf("Watch did not return within %v of the context's end", Timeout)
		}
	})
	return out
}

// LogContext returns a context whose logger writes to the test log and keeps
// a copy, and a function that returns what was logged so far.
func LogContext(t testing.TB) (context.Context, func() string) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	underlier, ok := logger.GetSink().(ktesting.Underlier)
	if !ok {
		t.Fatal("the ktesting logger keeps no buffer")
	}
	return klog.NewContext(context.Background(), logger), func() string { return underlier.GetBuffer().String() }
}

// WaitIdle waits until something waits on clk (the source sleeps between two
// polls).
func WaitIdle(t testing.TB, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("the source never waited on the clock within %v", Timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Step waits until the source sleeps on clk, moves clk by d (waking it),
// and waits until it sleeps again: one round of polling has completed.
func Step(t testing.TB, clk *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	WaitIdle(t, clk)
	clk.Step(d)
	WaitIdle(t, clk)
}

// Next returns the next notice, failing the test if none comes.
func Next(t testing.TB, out <-chan notice.Notice) notice.Notice {
	t.Helper()
	select {
	case n := <-out:
		return n
	case <-time.After(Timeout):
		t.Fatalf("no notice within %v", Timeout)
		return notice.Notice{}
	}
}

// None fails the test if a notice is waiting on out.
func None(t testing.TB, out <-chan notice.Notice) {
	t.Helper()
	select {
	case n := <-out:
		t.Fatalf("unexpected notice %+v", n)
	default:
	}
}

// Eventually waits until cond holds, failing the test after Timeout. what
// names the condition in the failure.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", Timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Reads records the reads a source reports (a notice.ReadObserver), in
// order. It is safe for concurrent use.
type Reads struct {
	mu    sync.Mutex
	reads []string
}

// ObserveRead records "path ok" or "path failed".
func (r *Reads) ObserveRead(path string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	r.reads = append(r.reads, path+" "+outcome)
}

// Take returns the reads recorded since the last Take, sorted when sorted
// is true (reads made concurrently come in any order), one a line.
func (r *Reads) Take(sorted bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reads := r.reads
	r.reads = nil
	if sorted {
		reads = append([]string(nil), reads...)
		slices.Sort(reads)
	}
	return strings.Join(reads, "\n")
}

// Count returns how many reads were recorded since the last Take.
func (r *Reads) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reads)
}
