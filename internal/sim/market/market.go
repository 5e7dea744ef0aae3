// Package market is the spot market of a simulated zone: how many spot nodes
// it can hold at each moment, when it takes running ones back, how late it
// reports a request it cannot hold, and the spot price, from the scenario's
// traces or its synthetic shortages.
package market

import (
	"math"
	"math/rand/v2"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
)

// Zone is a zone's spot market during a run: how many spot nodes it can hold,
// and when it takes running ones back.
type Zone struct {
	*scenario.Zone
	// Notice is how long before a preemption the cloud gives notice.
	Notice time.Duration
	// capacity: a trace (times scale, from offset) or a synthetic constant with
	// shortages.
	capTrace  *scenario.Trace
	capOffset time.Duration
	capScale  float64
	capNodes  int
	shortages [][2]time.Duration // [start, end) since the run's start
	// preemptions: a trace's drops, or a rate per node-hour.
	preTrace  *scenario.Trace
	preOffset time.Duration
	// PreRate is the preemption rate per node-hour (0: none, or a trace's
	// drops).
	PreRate float64
	// StockOutDelay is how late the cloud reports a request the market
	// cannot hold (0: refused at once).
	StockOutDelay time.Duration
	// priceTrace, when set, is the trace whose prices the zone's spot price
	// follows (the capacity trace's, else the preemption trace's).
	priceTrace  *scenario.Trace
	priceOffset time.Duration
}

// New is the market of the scenario's zone z; seed draws its synthetic
// shortages.
func New(z *scenario.Zone, sc *scenario.Scenario, seed int64) (*Zone, error) {
	out := &Zone{Zone: z, Notice: scenario.Notice(z.Cloud), capScale: z.SpotCapacity.Scale, capOffset: z.SpotCapacity.Offset.Duration,
		preOffset: z.Preemptions.Offset.Duration, PreRate: z.Preemptions.RatePerNodeHour,
		StockOutDelay: z.SpotCapacity.StockOutDelay.Duration}
	var err error
	if z.SpotCapacity.Trace != "" {
		if out.capTrace, err = scenario.LoadTrace(z.SpotCapacity.Trace, sc.Dir()); err != nil {
			return nil, err
		}
		out.capOffset = wrapOffset(out.capOffset, out.capTrace)
	} else {
		out.capNodes = int(*z.SpotCapacity.Nodes)
		if perDay := z.SpotCapacity.ShortagesPerDay; perDay > 0 {
			// A Poisson process of shortages, from the seed.
			rng := rand.New(rand.NewPCG(uint64(seed), 0xca9))
			length := z.SpotCapacity.ShortageDuration.Duration
			for t := time.Duration(0); t < sc.Duration.Duration; {
				// The gap is compared as a float: a rare shortage (a tiny
				// rate) draws a gap beyond any time.Duration, and converting
				// that to one is undefined.
				gap := rng.ExpFloat64() / perDay * float64(24*time.Hour)
				if gap >= float64(sc.Duration.Duration-t) {
					break
				}
				t += time.Duration(gap)
				out.shortages = append(out.shortages, [2]time.Duration{t, t + length})
				t += length
			}
		}
	}
	var preTrace *scenario.Trace
	if z.Preemptions.Trace != "" {
		if preTrace, err = scenario.LoadTrace(z.Preemptions.Trace, sc.Dir()); err != nil {
			return nil, err
		}
		out.preOffset = wrapOffset(out.preOffset, preTrace)
		if z.Preemptions.Hazard {
			out.PreRate = preTrace.Hazard()
		} else {
			out.preTrace = preTrace
		}
	}
	switch {
	case out.capTrace != nil && out.capTrace.Prices != nil:
		out.priceTrace, out.priceOffset = out.capTrace, out.capOffset
	case preTrace != nil && preTrace.Prices != nil:
		out.priceTrace, out.priceOffset = preTrace, out.preOffset
	}
	return out, nil
}

// PriceFactor is the zone's spot price at elapsed time d relative to the
// trace's mean price: 1 without a priced trace.
func (z *Zone) PriceFactor(d time.Duration) float64 {
	if z.priceTrace == nil {
		return 1
	}
	return z.priceTrace.PriceFactor(d + z.priceOffset)
}

// wrapOffset reduces an offset into a trace to less than the trace's length
// (the trace repeats), so that elapsed time plus offset cannot overflow.
func wrapOffset(offset time.Duration, t *scenario.Trace) time.Duration {
	if p := t.Period(); p > 0 {
		return offset % p
	}
	return offset
}

// Capacity is how many spot nodes the zone can hold at elapsed time d.
func (z *Zone) Capacity(d time.Duration) int {
	if z.capTrace != nil {
		return int(math.Round(float64(z.capTrace.At(d+z.capOffset)) * z.capScale))
	}
	for _, s := range z.shortages {
		if d >= s[0] && d < s[1] {
			return 0
		}
	}
	return z.capNodes
}

// Drop is a fall of the preemption trace: at elapsed time At, Lost
// instances were taken back.
type Drop struct {
	At   time.Duration
	Lost int
}

// HasDropTrace reports whether the zone's preemptions are a trace's drops
// (Drops), not a rate per node-hour (PreRate).
func (z *Zone) HasDropTrace() bool { return z.preTrace != nil }

// Drops are the preemption trace's drops between elapsed times from
// (excluded) and to (included), in order.
func (z *Zone) Drops(from, to time.Duration) []Drop {
	t := z.preTrace
	if t == nil || to <= from {
		return nil
	}
	i, j := int((from+z.preOffset)/t.Gap), int((to+z.preOffset)/t.Gap)
	var out []Drop
	for k := i + 1; k <= j; k++ {
		prev, cur := t.Data[(k-1)%len(t.Data)], t.Data[k%len(t.Data)]
		if prev > cur {
			out = append(out, Drop{At: time.Duration(k)*t.Gap - z.preOffset, Lost: prev - cur})
		}
	}
	return out
}
