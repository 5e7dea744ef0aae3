// Package backoff is Spotter's one implementation of exponential backoff: the
// wait after a failure doubles from an initial value up to a cap. Every retry
// and cooldown in Spotter (agent polls, the agent's node updates, evictions,
// drain failures, spot shortages, the simulator's autoscaler) uses it, so the
// arithmetic, and its guard against overflow, exist once.
//
// Doubling a time.Duration overflows int64 after 33 doublings of one second and
// after 17 of 24 hours; a shifted duration that overflows turns negative and a
// cooldown computed from it ends in the past. Delay never overflows: it stops
// doubling once the cap is reached.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait after the n-th consecutive failure: initial doubled
// n-1 times, at most limit. n below 1 counts as 1; a non-positive initial gives
// 0; a limit below initial gives limit (when positive). It never overflows and
// never returns a negative duration.
func Delay(initial, limit time.Duration, n int) time.Duration {
	if initial <= 0 {
		return 0
	}
	if limit > 0 && limit < initial {
		return limit
	}
	d := initial
	for i := 1; i < n; i++ {
		if limit > 0 && d >= limit-d { // 2d >= limit, without computing 2d
			return limit
		}
		if d > maxDuration/2 {
			return maxDuration
		}
		d *= 2
	}
	return d
}

const maxDuration = time.Duration(1<<63 - 1)

// Backoff counts consecutive failures and returns the wait after each one.
// The zero value with Initial and Max set is ready to use; it is not safe for
// concurrent use.
type Backoff struct {
	// Initial is the wait after the first failure.
	Initial time.Duration
	// Max caps the wait; 0 means no cap (Delay still never overflows).
	Max time.Duration
	// Jitter, between 0 and 1, spreads each wait at random over
	// [wait·(1-Jitter), wait], so that many clients do not retry in step.
	Jitter float64
	// Seed, when not 0, draws the jitter from a sequence of its own seeded
	// with it instead of the process's random source: waits then repeat for
	// the same seed (the drain engine seeds each pod's retries from its UID,
	// so that a simulation replays exactly, while pods still spread out).
	Seed uint64

	failures int
	rng      *rand.Rand
}

// Next records one more failure and returns the wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.failures++
	d := Delay(b.Initial, b.Max, b.failures)
	if b.Jitter > 0 && d > 0 {
		r := rand.Float64
		if b.Seed != 0 {
			if b.rng == nil {
				b.rng = rand.New(rand.NewPCG(b.Seed, 0x9e3779b97f4a7c15))
			}
			r = b.rng.Float64
		}
		d -= time.Duration(r() * min(b.Jitter, 1) * float64(d))
	}
	return d
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures returns the number of failures since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

// Cooldown is a failure record: how many times something failed in a row and
// until when it rests. Controllers keep one per node or node group.
type Cooldown struct {
	// Failures counts consecutive failures.
	Failures int
	// Until is when the cooldown after the last failure ends.
	Until time.Time
}

// Fail records one more failure at now and returns the end of the cooldown:
// now plus Delay(initial, limit, Failures).
func (c *Cooldown) Fail(now time.Time, initial, limit time.Duration) time.Time {
	c.Failures++
	c.Until = now.Add(Delay(initial, limit, c.Failures))
	return c.Until
}

// Active reports whether the cooldown still runs at now.
func (c Cooldown) Active(now time.Time) bool { return now.Before(c.Until) }

// FailStreak records a failure at now like Fail, but counts it as one more of
// a streak only when the streak is unbroken: when the previous cooldown ended
// at most as long before now as it lasted (the thing was tried again soon
// after its rest, and failed again). After a longer quiet time the streak
// starts over at 1, so the wait grows only while failures are continuous.
// Callers that see a success should clear the record (Cooldown{}).
func (c *Cooldown) FailStreak(now time.Time, initial, limit time.Duration) time.Time {
	if c.Failures > 0 && now.Sub(c.Until) > Delay(initial, limit, c.Failures) {
		c.Failures = 0
	}
	return c.Fail(now, initial, limit)
}
