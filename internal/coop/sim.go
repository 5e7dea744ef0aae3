package coop

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Sim is the Scheduler of a simulation: a clock that stands still until
// RunUntil moves it, and goroutines (Go) that run one at a time, each until
// it waits (SleepContext, Await) or returns. RunUntil runs every goroutine
// that can run, then moves the clock to the earliest timer or sleep that
// ends, wakes it, and so on up to the time asked for: code written with this
// package runs as it would in a process, in simulated time, and the same
// inputs give the same run.
//
// Order, for determinism: goroutines started and not yet run go first, in
// the order they were started; then parked goroutines that can go on (their
// context ended, or their Await condition holds), in the order they parked;
// then timers and sleeps, earliest first, in the order they were set on a
// tie. A timer's function (AfterFunc) runs on the goroutine that called
// RunUntil, between two goroutines; it must not wait.
//
// Sim implements clock.WithTickerAndDelayedExecution. Its channel timers
// (After, NewTimer, Tick) may be used by goroutines that are not its own
// (they then block as on a real clock, without being scheduled); its own
// goroutines must wait through this package's functions, never on a bare
// channel that another of its goroutines fills.
type Sim struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	current *task
	started []*task // Go'ne and not yet run
	parked  []*task // in SleepContext or Await, in the order they parked
	timers  []*simTimer
	live    int
	yield   chan struct{}
	// Watchdog bounds the wall-clock time one goroutine may run before it
	// waits again: a goroutine that blocks outside this package would hang
	// the simulation; it panics instead, with every goroutine's stack.
	// Default 5m.
	Watchdog time.Duration
}

type task struct {
	wake chan struct{}
	seq  uint64
	// While parked:
	ctx      context.Context
	sleeping bool
	until    time.Time
	ready    func() bool
	err      error
	// readied says that ready() woke the goroutine (AwaitFor).
	readied bool
}

// NewSim returns a Sim whose clock starts at now.
func NewSim(now time.Time) *Sim {
	return &Sim{now: now, yield: make(chan struct{}), Watchdog: 5 * time.Minute}
}

var _ clock.WithTickerAndDelayedExecution = (*Sim)(nil)
var _ Scheduler = (*Sim)(nil)

// Now is the simulated time.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Since is Now().Sub(t).
func (s *Sim) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// Live is the number of goroutines started by Go that have not returned.
func (s *Sim) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// Go starts fn as one of the Sim's goroutines. It first runs at the next
// RunUntil, or when the running goroutine waits.
func (s *Sim) Go(fn func()) {
	s.mu.Lock()
	s.seq++
	t := &task{wake: make(chan struct{}), seq: s.seq}
	s.started = append(s.started, t)
	s.live++
	s.mu.Unlock()
	go func() {
		<-t.wake
		defer func() {
			s.mu.Lock()
			s.live--
			s.mu.Unlock()
			s.yield <- struct{}{}
		}()
		fn()
	}()
}

// SleepContext parks the calling goroutine until d has passed or ctx ended.
// Called from a goroutine that is not the Sim's, it waits on a channel timer.
func (s *Sim) SleepContext(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	s.mu.Lock()
	t := s.current
	if t == nil {
		s.mu.Unlock()
		timer := s.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C():
			return nil
		}
	}
	t.ctx, t.sleeping, t.until, t.ready = ctx, true, s.now.Add(d), nil
	return s.park(t)
}

// AwaitFor parks the calling goroutine until ready(), d has passed or ctx
// ended; it reports whether ready() came first. It must be called from one of
// the Sim's goroutines.
func (s *Sim) AwaitFor(ctx context.Context, d time.Duration, ready func() bool) (bool, error) {
	if ready() {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, context.Cause(ctx)
	}
	s.mu.Lock()
	t := s.current
	if t == nil {
		s.mu.Unlock()
		panic("coop: AwaitFor called from a goroutine the Sim did not start (use Go)")
	}
	t.ctx, t.sleeping, t.until, t.ready, t.readied = ctx, true, s.now.Add(d), ready, false
	err := s.park(t)
	return t.readied, err
}

// Await parks the calling goroutine until ready() or the end of ctx. It must
// be called from one of the Sim's goroutines.
func (s *Sim) Await(ctx context.Context, ready func() bool) error {
	if ready() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	s.mu.Lock()
	t := s.current
	if t == nil {
		s.mu.Unlock()
		panic("coop: Await called from a goroutine the Sim did not start (use Go)")
	}
	t.ctx, t.sleeping, t.ready = ctx, false, ready
	return s.park(t)
}

// park records t as parked (s.mu held), hands control back to RunUntil and
// waits to be woken.
func (s *Sim) park(t *task) error {
	s.seq++
	t.seq = s.seq
	s.parked = append(s.parked, t)
	s.current = nil
	s.mu.Unlock()
	s.yield <- struct{}{}
	<-t.wake
	return t.err
}

// Sleep is SleepContext without a context.
func (s *Sim) Sleep(d time.Duration) { _ = s.SleepContext(context.Background(), d) }

// RunUntil runs the Sim's goroutines and moves its clock up to until (never
// back): see Sim. It returns when nothing is left to run before until.
func (s *Sim) RunUntil(until time.Time) {
	for {
		s.mu.Lock()
		if t := s.runnable(); t != nil {
			s.resume(t)
			continue
		}
		at, timer, sleeper := s.earliest()
		if timer == nil && sleeper == nil || at.After(until) {
			if until.After(s.now) {
				s.now = until
			}
			s.mu.Unlock()
			return
		}
		if at.After(s.now) {
			s.now = at
		}
		if sleeper != nil {
			sleeper.err = nil
			s.resume(sleeper)
			continue
		}
		fn := s.fire(timer)
		s.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// runnable returns the goroutine to run now, or nil (s.mu held).
func (s *Sim) runnable() *task {
	if len(s.started) > 0 {
		t := s.started[0]
		s.started = s.started[1:]
		return t
	}
	for i, t := range s.parked {
		if t.ctx.Err() != nil {
			t.err = context.Cause(t.ctx)
		} else if t.ready == nil || !t.ready() {
			continue
		} else {
			t.err, t.readied = nil, true
		}
		s.parked = slices.Delete(s.parked, i, i+1)
		return t
	}
	return nil
}

// earliest returns the first timer or sleep to end, and when (s.mu held).
func (s *Sim) earliest() (time.Time, *simTimer, *task) {
	var at time.Time
	var seq uint64
	var timer *simTimer
	var sleeper *task
	better := func(when time.Time, n uint64) bool {
		return timer == nil && sleeper == nil || when.Before(at) || when.Equal(at) && n < seq
	}
	for _, t := range s.timers {
		if better(t.when, t.seq) {
			at, seq, timer, sleeper = t.when, t.seq, t, nil
		}
	}
	for _, t := range s.parked {
		if t.sleeping && better(t.until, t.seq) {
			at, seq, timer, sleeper = t.until, t.seq, nil, t
		}
	}
	return at, timer, sleeper
}

// resume runs t until it waits again or returns (s.mu held, released).
func (s *Sim) resume(t *task) {
	s.parked = slices.DeleteFunc(s.parked, func(x *task) bool { return x == t })
	s.current = t
	s.mu.Unlock()
	t.wake <- struct{}{}
	watchdog := time.NewTimer(s.Watchdog)
	defer watchdog.Stop()
	select {
	case <-s.yield:
	case <-watchdog.C:
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic(fmt.Sprintf("coop: a goroutine of the simulation ran for %s without waiting through package coop; it probably blocks outside it.\n%s", s.Watchdog, buf[:n]))
	}
	s.mu.Lock()
	s.current = nil
	s.mu.Unlock()
}

// fire ends timer t (s.mu held): a channel timer gets the time, a ticker is
// set again, and a function timer's function is returned to be run.
func (s *Sim) fire(t *simTimer) func() {
	s.timers = slices.DeleteFunc(s.timers, func(x *simTimer) bool { return x == t })
	if t.fn != nil {
		return t.fn
	}
	select {
	case t.ch <- s.now:
	default:
	}
	if t.period > 0 {
		s.seq++
		t.when, t.seq = s.now.Add(t.period), s.seq
		s.timers = append(s.timers, t)
	}
	return nil
}

// simTimer is a timer of the Sim.
type simTimer struct {
	s      *Sim
	when   time.Time
	seq    uint64
	ch     chan time.Time
	fn     func()
	period time.Duration
}

func (s *Sim) addTimer(d time.Duration, fn func(), period time.Duration) *simTimer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	t := &simTimer{s: s, when: s.now.Add(d), seq: s.seq, fn: fn, period: period}
	if fn == nil {
		t.ch = make(chan time.Time, 1)
	}
	s.timers = append(s.timers, t)
	return t
}

// After returns a channel that gets the time once d has passed.
func (s *Sim) After(d time.Duration) <-chan time.Time { return s.addTimer(d, nil, 0).ch }

// NewTimer returns a timer that fires once d has passed.
func (s *Sim) NewTimer(d time.Duration) clock.Timer { return s.addTimer(d, nil, 0) }

// AfterFunc runs f on the goroutine of RunUntil once d has passed.
func (s *Sim) AfterFunc(d time.Duration, f func()) clock.Timer { return s.addTimer(d, f, 0) }

// Tick returns a channel that gets the time every d.
func (s *Sim) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return s.addTimer(d, nil, d).ch
}

// NewTicker returns a ticker that fires every d.
func (s *Sim) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("coop: non-positive interval for NewTicker")
	}
	return &simTicker{s.addTimer(d, nil, d)}
}

// C is the timer's channel (nil for a function timer).
func (t *simTimer) C() <-chan time.Time { return t.ch }

// Stop stops the timer; it reports whether the timer was pending.
func (t *simTimer) Stop() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	n := len(t.s.timers)
	t.s.timers = slices.DeleteFunc(t.s.timers, func(x *simTimer) bool { return x == t })
	return len(t.s.timers) < n
}

// Reset sets the timer to fire d from now; it reports whether it was
// pending.
func (t *simTimer) Reset(d time.Duration) bool {
	was := t.Stop()
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.seq++
	t.when, t.seq = t.s.now.Add(d), t.s.seq
	t.s.timers = append(t.s.timers, t)
	return was
}

type simTicker struct{ t *simTimer }

func (k *simTicker) C() <-chan time.Time { return k.t.ch }
func (k *simTicker) Stop()               { k.t.Stop() }

// Step is RunUntil(Now() + d).
func (s *Sim) Step(d time.Duration) { s.RunUntil(s.Now().Add(d)) }

// SetTime is RunUntil(t) for a later t. An earlier t only sets the clock back,
// running nothing: for tests that look at a time-dependent input at several
// times.
func (s *Sim) SetTime(t time.Time) {
	s.mu.Lock()
	if t.Before(s.now) {
		s.now = t
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.RunUntil(t)
}
