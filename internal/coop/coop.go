// Package coop is how Spotter's controllers wait: sleeps, goroutines and
// bounded groups of goroutines on an injected clock. With a real or a test
// clock these are the plain Go constructs (a select on the clock and the
// context, the go statement, a semaphore and a WaitGroup). With a Scheduler
// (the simulator's clock, NewSim) the goroutines run one at a time and the
// clock moves only when every one of them waits: the controllers then run,
// unchanged and deterministically, inside `spotter simulate`.
//
// The rule for code that may run under a Scheduler: every wait of a
// goroutine goes through this package (Sleep, Go, Group, WaitClosed), and
// goroutines that wait are started with Go. Goroutines that never wait (a
// computation fanned out and joined before the caller goes on) may use the go
// statement.
package coop

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Scheduler is a clock that also runs the goroutines that wait on it. See
// Sim.
type Scheduler interface {
	clock.Clock
	// Go starts fn as a goroutine of the scheduler.
	Go(fn func())
	// SleepContext parks the calling goroutine until d has passed on the
	// clock or ctx ended, and returns nil or ctx's cause.
	SleepContext(ctx context.Context, d time.Duration) error
	// Await parks the calling goroutine until ready() or the end of ctx, and
	// returns nil or ctx's cause. ready is called by the scheduler whenever
	// another goroutine has run.
	Await(ctx context.Context, ready func() bool) error
	// AwaitFor is Await for at most d: it reports whether ready() came
	// first.
	AwaitFor(ctx context.Context, d time.Duration, ready func() bool) (bool, error)
}

// Sleep waits d on clk, or until ctx ends: it returns nil after d, else ctx's
// cause.
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if s, ok := clk.(Scheduler); ok {
		return s.SleepContext(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-clk.After(d):
		return nil
	}
}

// Go runs fn in a new goroutine: a goroutine of clk when it is a Scheduler.
func Go(clk clock.Clock, fn func()) {
	if s, ok := clk.(Scheduler); ok {
		s.Go(fn)
		return
	}
	go fn()
}

// SleepOrReceive waits d on clk, or until a value comes on ch (which it
// takes), or until ctx ends: it reports whether the value came first, and
// returns ctx's cause when ctx ended.
func SleepOrReceive(ctx context.Context, clk clock.Clock, d time.Duration, ch <-chan struct{}) (bool, error) {
	if s, ok := clk.(Scheduler); ok {
		return s.AwaitFor(ctx, d, func() bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		})
	}
	if err := ctx.Err(); err != nil {
		return false, context.Cause(ctx)
	}
	select {
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-ch:
		return true, nil
	case <-clk.After(d):
		return false, nil
	}
}

// WaitClosed waits until ch is closed or ctx ends; it returns nil or ctx's
// cause.
func WaitClosed(ctx context.Context, clk clock.Clock, ch <-chan struct{}) error {
	if s, ok := clk.(Scheduler); ok {
		return s.Await(ctx, func() bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		})
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Group runs functions in goroutines, at most limit at a time, and waits for
// them: a semaphore and a sync.WaitGroup, or their Scheduler equivalents.
type Group struct {
	clk   clock.Clock
	sched Scheduler
	limit int
	// Plain Go: a semaphore and a WaitGroup.
	sem chan struct{}
	wg  sync.WaitGroup
	// Under a Scheduler, goroutines run one at a time: a counter is enough.
	active int
}

// NewGroup returns a Group of at most limit (at least 1) goroutines at a
// time on clk.
func NewGroup(clk clock.Clock, limit int) *Group {
	limit = max(limit, 1)
	g := &Group{clk: clk, limit: limit}
	if s, ok := clk.(Scheduler); ok {
		g.sched = s
	} else {
		g.sem = make(chan struct{}, limit)
	}
	return g
}

// Go waits for a free slot, then runs fn in a goroutine. When ctx ends first
// it runs nothing and returns ctx's cause.
func (g *Group) Go(ctx context.Context, fn func()) error {
	if g.sched != nil {
		if err := g.sched.Await(ctx, func() bool { return g.active < g.limit }); err != nil {
			return err
		}
		g.active++
		g.sched.Go(func() {
			defer func() { g.active-- }()
			fn()
		})
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if ctx.Err() != nil {
		// Both were ready and select took the slot: ctx ended all the same.
		<-g.sem
		return context.Cause(ctx)
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() { <-g.sem }()
		fn()
	}()
	return nil
}

// Wait waits until every function started by Go has returned.
func (g *Group) Wait() {
	if g.sched != nil {
		_ = g.sched.Await(context.Background(), func() bool { return g.active == 0 })
		return
	}
	g.wg.Wait()
}
