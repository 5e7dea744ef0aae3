package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// zone is a zone's spot market during a run: how many spot nodes it can hold,
// and when it takes running ones back.
type zone struct {
	*Zone
	notice time.Duration
	// capacity: a trace (times scale, from offset) or a synthetic constant with
	// shortages.
	capTrace  *Trace
	capOffset time.Duration
	capScale  float64
	capNodes  int
	shortages [][2]time.Duration // [start, end) since the run's start
	// preemptions: a trace's drops, or a rate per node-hour.
	preTrace  *Trace
	preOffset time.Duration
	preRate   float64
	// stockOutDelay is how late the cloud reports a request the market
	// cannot hold (0: refused at once).
	stockOutDelay time.Duration
	// priceTrace, when set, is the trace whose prices the zone's spot price
	// follows (the capacity trace's, else the preemption trace's).
	priceTrace  *Trace
	priceOffset time.Duration
}

func newZone(z *Zone, sc *Scenario, seed int64, start time.Time) (*zone, error) {
	out := &zone{Zone: z, notice: Notice(z.Cloud), capScale: z.SpotCapacity.Scale, capOffset: z.SpotCapacity.Offset.Duration,
		preOffset: z.Preemptions.Offset.Duration, preRate: z.Preemptions.RatePerNodeHour,
		stockOutDelay: z.SpotCapacity.StockOutDelay.Duration}
	var err error
	if z.SpotCapacity.Trace != "" {
		if out.capTrace, err = LoadTrace(z.SpotCapacity.Trace, sc.dir); err != nil {
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
	var preTrace *Trace
	if z.Preemptions.Trace != "" {
		if preTrace, err = LoadTrace(z.Preemptions.Trace, sc.dir); err != nil {
			return nil, err
		}
		out.preOffset = wrapOffset(out.preOffset, preTrace)
		if z.Preemptions.Hazard {
			out.preRate = preTrace.hazard()
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

// priceFactor is the zone's spot price at elapsed time d relative to the
// trace's mean price: 1 without a priced trace.
func (z *zone) priceFactor(d time.Duration) float64 {
	if z.priceTrace == nil {
		return 1
	}
	return z.priceTrace.PriceFactor(d + z.priceOffset)
}

// wrapOffset reduces an offset into a trace to less than the trace's length
// (the trace repeats), so that elapsed time plus offset cannot overflow.
func wrapOffset(offset time.Duration, t *Trace) time.Duration {
	if p := t.period(); p > 0 {
		return offset % p
	}
	return offset
}

// capacity is how many spot nodes the zone can hold at elapsed time d.
func (z *zone) capacity(d time.Duration) int {
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

// drop is a fall of the preemption trace: at elapsed time at, lost
// instances were taken back.
type drop struct {
	at   time.Duration
	lost int
}

// traceDrops are the preemption trace's drops between elapsed times from
// (excluded) and to (included), in order.
func (z *zone) traceDrops(from, to time.Duration) []drop {
	t := z.preTrace
	if t == nil || to <= from {
		return nil
	}
	i, j := int((from+z.preOffset)/t.Gap), int((to+z.preOffset)/t.Gap)
	var out []drop
	for k := i + 1; k <= j; k++ {
		prev, cur := t.Data[(k-1)%len(t.Data)], t.Data[k%len(t.Data)]
		if prev > cur {
			out = append(out, drop{at: time.Duration(k)*t.Gap - z.preOffset, lost: prev - cur})
		}
	}
	return out
}
