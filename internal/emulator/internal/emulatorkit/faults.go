package emulatorkit

import "sync"

// Faults holds the faults injected into an emulator's calls: throttles (the
// next n calls, or each call with a probability) per class of calls, and
// errors queued for the next calls of a method. E is the emulator's error
// type. It is safe for concurrent use; the zero value is ready.
type Faults[E any] struct {
	mu        sync.Mutex
	throttles map[string]*throttle // by class
	failNext  map[string][]E       // by method
}

type throttle struct {
	next     int
	fraction float64
}

// ThrottleNext makes the next n calls of class throttled.
func (f *Faults[E]) ThrottleNext(class string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle(class).next = n
}

// SetThrottleFraction throttles each call of class with probability p (0
// turns it off).
func (f *Faults[E]) SetThrottleFraction(class string, p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle(class).fraction = p
}

// FailNext queues err for the next call of method; several calls queue
// several errors, answered in order.
func (f *Faults[E]) FailNext(method string, err E) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext == nil {
		f.failNext = map[string][]E{}
	}
	f.failNext[method] = append(f.failNext[method], err)
}

// Admit counts a call of method, of class, in calls and returns the fault it
// meets: throttled, when a throttle of class takes it (ThrottleNext's count
// first, then the fraction, drawn with draw, a source of numbers in [0, 1)
// called only while a fraction is set); else the error queued for method
// (failed), if any.
func (f *Faults[E]) Admit(calls *Counter, class, method string, draw func() float64) (throttled bool, err E, failed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.throttles[class]; t != nil {
		if t.next > 0 {
			t.next--
			throttled = true
		} else if t.fraction > 0 && draw() < t.fraction {
			throttled = true
		}
	}
	calls.count(method, throttled)
	if throttled {
		return true, err, false
	}
	if q := f.failNext[method]; len(q) > 0 {
		f.failNext[method] = q[1:]
		return false, q[0], true
	}
	return false, err, false
}

// throttle returns the throttle of class, made on first use; f.mu is held.
func (f *Faults[E]) throttle(class string) *throttle {
	if f.throttles == nil {
		f.throttles = map[string]*throttle{}
	}
	t := f.throttles[class]
	if t == nil {
		t = &throttle{}
		f.throttles[class] = t
	}
	return t
}
