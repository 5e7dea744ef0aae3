package coop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// The Sim's goroutines wake at their times, in order, and the clock stands
// at the time asked for afterwards.
func TestSimSleepsInOrder(t *testing.T) {
	s := NewSim(t0)
	var log []string
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		s.Go(func() {
			for i := range 2 {
				if err := Sleep(context.Background(), s, d); err != nil {
					t.Error(err)
				}
				log = append(log, fmt.Sprintf("%s:%d@%s", d, i, s.Since(t0)))
			}
		})
	}
	s.RunUntil(t0.Add(5 * time.Second))
	want := []string{"1s:0@1s", "2s:0@2s", "1s:1@2s", "3s:0@3s", "2s:1@4s"}
	if !slices.Equal(log, want) {
		t.Errorf("wakes = %v, want %v", log, want)
	}
	if got := s.Since(t0); got != 5*time.Second {
		t.Errorf("clock at %s, want 5s", got)
	}
	if s.Live() != 1 {
		t.Errorf("live = %d, want 1 (the 3s sleeper, asleep until 6s)", s.Live())
	}
	s.RunUntil(t0.Add(time.Minute))
	if s.Live() != 0 || len(log) != 6 {
		t.Errorf("live = %d, wakes %v: every goroutine should have returned", s.Live(), log)
	}
}

// A context that ends on the Sim's clock (an AfterFunc deadline) wakes a
// goroutine asleep in it with the cause; a sleep then ends no later.
func TestSimContextDeadline(t *testing.T) {
	s := NewSim(t0)
	cause := errors.New("deadline")
	var got error
	var at time.Duration
	s.Go(func() {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		s.AfterFunc(10*time.Second, func() { cancel(cause) })
		got = Sleep(ctx, s, time.Hour)
		at = s.Since(t0)
	})
	s.RunUntil(t0.Add(2 * time.Hour))
	if !errors.Is(got, cause) || at != 10*time.Second {
		t.Errorf("sleep returned %v at %s, want %v at 10s", got, at, cause)
	}
}

// A Group runs at most its limit at a time, under the Sim as on a real
// clock, and Wait returns when all are done.
func TestGroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		clk  func() (clock.Clock, func(func()))
	}{
		{"sim", func() (clock.Clock, func(func())) {
			s := NewSim(t0)
			return s, func(fn func()) { s.Go(fn); s.RunUntil(t0.Add(time.Hour)) }
		}},
		{"real", func() (clock.Clock, func(func())) { return clock.RealClock{}, func(fn func()) { fn() } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, run := tc.clk()
			var active, most, done atomic.Int32
			run(func() {
				g := NewGroup(clk, 3)
				for range 10 {
					if err := g.Go(context.Background(), func() {
						n := active.Add(1)
						for {
							m := most.Load()
							if n <= m || most.CompareAndSwap(m, n) {
								break
							}
						}
						_ = Sleep(context.Background(), clk, time.Millisecond)
						active.Add(-1)
						done.Add(1)
					}); err != nil {
						t.Error(err)
					}
				}
				g.Wait()
				if done.Load() != 10 {
					t.Errorf("Wait returned with %d of 10 done", done.Load())
				}
			})
			if most.Load() > 3 || most.Load() < 1 {
				t.Errorf("at most %d at a time, want 1 to 3", most.Load())
			}
		})
	}
}

// Go on a Group whose context has ended runs nothing.
func TestGroupContextEnded(t *testing.T) {
	s := NewSim(t0)
	ran := false
	var err error
	s.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		g := NewGroup(s, 1)
		_ = g.Go(ctx, func() { _ = Sleep(context.Background(), s, time.Minute) })
		cancel()
		err = g.Go(ctx, func() { ran = true })
		g.Wait()
	})
	s.RunUntil(t0.Add(time.Hour))
	if ran || !errors.Is(err, context.Canceled) {
		t.Errorf("ran = %v, err = %v; want nothing run and context.Canceled", ran, err)
	}
}

// WaitClosed wakes when another goroutine closes the channel.
func TestWaitClosed(t *testing.T) {
	s := NewSim(t0)
	ch := make(chan struct{})
	var at time.Duration
	s.Go(func() {
		if err := WaitClosed(context.Background(), s, ch); err != nil {
			t.Error(err)
		}
		at = s.Since(t0)
	})
	s.Go(func() {
		_ = Sleep(context.Background(), s, 7*time.Second)
		close(ch)
	})
	s.RunUntil(t0.Add(time.Minute))
	if at != 7*time.Second {
		t.Errorf("woke at %s, want 7s", at)
	}
}

// Timers and tickers on the Sim fire at their times for goroutines that are
// not its own.
func TestSimTimers(t *testing.T) {
	s := NewSim(t0)
	tick := s.NewTicker(time.Second)
	timer := s.NewTimer(1500 * time.Millisecond)
	stopped := s.NewTimer(time.Second)
	if !stopped.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
	s.RunUntil(t0.Add(2 * time.Second))
	if got := <-timer.C(); got != t0.Add(1500*time.Millisecond) {
		t.Errorf("timer fired at %s", got)
	}
	if got := <-tick.C(); got != t0.Add(time.Second) {
		t.Errorf("first tick at %s, want +1s", got)
	}
	select {
	case <-stopped.C():
		t.Error("a stopped timer fired")
	default:
	}
	tick.Stop()
}

// SleepOrReceive ends early when a value comes, under the Sim as on a real
// clock, and after its time otherwise.
func TestSleepOrReceive(t *testing.T) {
	s := NewSim(t0)
	ch := make(chan struct{}, 1)
	type wake struct {
		got bool
		at  time.Duration
	}
	var wakes []wake
	s.Go(func() {
		for range 2 {
			got, err := SleepOrReceive(context.Background(), s, time.Hour, ch)
			if err != nil {
				t.Error(err)
			}
			wakes = append(wakes, wake{got, s.Since(t0)})
		}
	})
	s.RunUntil(t0.Add(10 * time.Minute))
	ch <- struct{}{} // from outside the Sim's goroutines, as the simulated world sends
	s.RunUntil(t0.Add(3 * time.Hour))
	if want := []wake{{true, 10 * time.Minute}, {false, 70 * time.Minute}}; !slices.Equal(wakes, want) {
		t.Errorf("wakes %v, want %v", wakes, want)
	}
	rch := make(chan struct{}, 1)
	rch <- struct{}{}
	if got, err := SleepOrReceive(context.Background(), clock.RealClock{}, time.Hour, rch); !got || err != nil {
		t.Errorf("real clock: got %v, %v; want the value at once", got, err)
	}
}
