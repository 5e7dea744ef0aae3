package emulatorkit

import (
	"maps"
	"sync"
)

// Counter counts the requests an emulator received, by method (an action or
// operation ID, as the emulator names them), and those an injected throttle
// refused. An emulator embeds it so that its tests read the counts. It is
// safe for concurrent use; the zero value is ready.
type Counter struct {
	mu        sync.Mutex
	calls     map[string]int
	throttled map[string]int
}

// Calls returns how many requests of method reached the emulator,
// throttled and failed ones included.
func (c *Counter) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// AllCalls returns the call count of every method called so far.
func (c *Counter) AllCalls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.calls)
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// Throttled returns how many requests of method an injected throttle
// refused.
func (c *Counter) Throttled(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttled[method]
}

// ResetCalls zeroes the call and throttle counters.
func (c *Counter) ResetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.calls)
	clear(c.throttled)
}

// count records a request of method, and whether it was throttled.
func (c *Counter) count(method string, throttled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls, c.throttled = map[string]int{}, map[string]int{}
	}
	c.calls[method]++
	if throttled {
		c.throttled[method]++
	}
}
