package backoff

import (
	"slices"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name           string
		initial, limit time.Duration
		n              int
		want           time.Duration
	}{
		{"first failure", time.Second, time.Minute, 1, time.Second},
		{"n below one", time.Second, time.Minute, 0, time.Second},
		{"doubles", time.Second, time.Minute, 4, 8 * time.Second},
		{"capped", time.Second, time.Minute, 7, time.Minute},
		{"limit below initial", time.Minute, time.Second, 1, time.Second},
		{"zero initial", 0, time.Minute, 5, 0},
		{"negative initial", -time.Second, time.Minute, 5, 0},
		// A 24 h base overflowed int64 after 17 doublings with a plain shift.
		{"24h base, 18th failure", day, 1000 * day, 18, 1000 * day},
		{"24h base, no cap, 40th failure", day, 0, 40, maxDuration},
		{"1s base, 1000th failure", time.Second, 4 * time.Hour, 1000, 4 * time.Hour},
		{"huge n, no cap", time.Nanosecond, 0, 1 << 30, maxDuration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Delay(tc.initial, tc.limit, tc.n); got != tc.want {
				t.Errorf("Delay(%v, %v, %d) = %v, want %v", tc.initial, tc.limit, tc.n, got, tc.want)
			}
		})
	}
}

func TestDelayNeverNegativeNorDecreasing(t *testing.T) {
	for _, initial := range []time.Duration{1, time.Millisecond, time.Second, 24 * time.Hour, maxDuration / 3, maxDuration} {
		for _, limit := range []time.Duration{0, time.Hour, maxDuration} {
			prev := time.Duration(0)
			for n := 1; n < 100; n++ {
				d := Delay(initial, limit, n)
				if d < 0 || d < prev {
					t.Fatalf("Delay(%v, %v, %d) = %v after %v", initial, limit, n, d, prev)
				}
				prev = d
			}
		}
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 4 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	}
	if b.Failures() != 5 {
		t.Errorf("Failures() = %d, want 5", b.Failures())
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Errorf("after Reset, Next() = %v, want 1s", d)
	}
}

func TestBackoffJitterStaysInRange(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 8 * time.Second, Jitter: 0.5}
	for n := 1; n <= 200; n++ {
		want := Delay(time.Second, 8*time.Second, n)
		d := b.Next()
		if d > want || d < want/2 {
			t.Fatalf("failure %d: wait %v outside [%v, %v]", n, d, want/2, want)
		}
	}
}

func TestCooldown(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c Cooldown
	if c.Active(now) {
		t.Fatal("zero Cooldown is active")
	}
	if until := c.Fail(now, time.Minute, time.Hour); !until.Equal(now.Add(time.Minute)) {
		t.Errorf("first Fail until %v, want +1m", until)
	}
	if !c.Active(now.Add(59*time.Second)) || c.Active(now.Add(time.Minute)) {
		t.Error("cooldown should run for exactly one minute")
	}
	for range 30 {
		c.Fail(now, 24*time.Hour, 0)
	}
	if !c.Until.After(now) {
		t.Fatalf("after 31 failures with a 24h base the cooldown ends at %v, before now", c.Until)
	}
}

// A seeded backoff repeats its jittered waits; another seed gives others,
// each within [wait·(1-Jitter), wait].
func TestSeededJitterRepeats(t *testing.T) {
	waits := func(seed uint64) []time.Duration {
		b := Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.5, Seed: seed}
		var out []time.Duration
		for range 8 {
			out = append(out, b.Next())
		}
		return out
	}
	a, again, other := waits(7), waits(7), waits(8)
	if !slices.Equal(a, again) {
		t.Errorf("seed 7 gave %v, then %v", a, again)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 gave the same waits %v", a)
	}
	for i, d := range a {
		full := Delay(time.Second, time.Minute, i+1)
		if d > full || d < full/2 {
			t.Errorf("wait %d = %s, want within [%s, %s]", i+1, d, full/2, full)
		}
	}
}

// FailStreak doubles the rest only while failures follow each other (each
// within a rest's length of the previous rest's end); after a longer quiet
// time it starts over at the initial wait.
func TestFailStreak(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const initial, limit = 2 * time.Minute, time.Hour
	for _, tc := range []struct {
		name string
		// gaps between the end of each rest and the next failure
		gaps []time.Duration
		// the rest after each failure (the first failure's included)
		want []time.Duration
	}{
		{"retried at once: doubles to the cap", []time.Duration{0, 0, 0, 0, 0, 0},
			[]time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}},
		{"retried within a rest's length: continuous", []time.Duration{2 * time.Minute, 4 * time.Minute},
			[]time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute}},
		{"a quiet time longer than the rest: starts over", []time.Duration{0, 4*time.Minute + time.Second, 0},
			[]time.Duration{2 * time.Minute, 4 * time.Minute, 2 * time.Minute, 4 * time.Minute}},
		{"failures an hour apart never grow", []time.Duration{time.Hour, time.Hour, time.Hour},
			[]time.Duration{2 * time.Minute, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cooldown
			now := t0
			var got []time.Duration
			for i := range len(tc.want) {
				if i > 0 {
					now = c.Until.Add(tc.gaps[i-1])
				}
				got = append(got, c.FailStreak(now, initial, limit).Sub(now))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rests %v, want %v", got, tc.want)
			}
		})
	}
}
