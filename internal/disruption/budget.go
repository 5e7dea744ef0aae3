// Package disruption is the one budget that every controller draining nodes
// voluntarily (the rescheduler and the migrator) shares: at most
// MaxConcurrentDrains nodes at once, cluster-wide, and only inside the allowed
// windows when any are configured. Interruption handling does not use it.
//
// Only the leader acts, so an in-process budget is cluster-wide.
package disruption

import (
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Budget hands out drain slots.
type Budget struct {
	mu      sync.Mutex
	max     int
	holders map[string]string // node -> component
	windows []Window
	// received: when a consolidation last sent pods to each on-demand node
	// (Received).
	received map[string]time.Time
}

// Window is a recurring period in which voluntary drains are allowed: it opens
// at each activation of Schedule, read in Location, and stays open for
// Duration.
type Window struct {
	Schedule cron.Schedule
	Duration time.Duration
	// Location is the time zone the schedule is read in; nil means UTC.
	Location *time.Location
}

// New returns the budget the configuration describes.
func New(cfg v1alpha1.DisruptionConfig) (*Budget, error) {
	var windows []Window
	for i, w := range cfg.Windows {
		sched, err := v1alpha1.ParseSchedule(w.Schedule)
		if err != nil {
			return nil, fmt.Errorf("disruption.windows[%d].schedule: %w", i, err)
		}
		tz := w.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("disruption.windows[%d].timeZone: %w", i, err)
		}
		windows = append(windows, Window{Schedule: sched, Duration: w.Duration.Duration, Location: loc})
	}
	return NewWithWindows(int(cfg.MaxConcurrentDrains), windows...), nil
}

// NewWithWindows returns a budget of max concurrent drains (at least 1),
// allowed within windows, or at any time when there are none.
func NewWithWindows(max int, windows ...Window) *Budget {
	b := &Budget{max: max, holders: map[string]string{}, windows: windows, received: map[string]time.Time{}}
	if b.max < 1 {
		b.max = 1
	}
	for i := range b.windows {
		if b.windows[i].Location == nil {
			b.windows[i].Location = time.UTC
		}
	}
	return b
}

// Open reports whether voluntary drains are allowed at now: always when no
// window is configured, else when now falls inside one. When closed, next is
// when the next window opens, after now; it is zero when no window will ever
// open (a schedule that matches no date), which a caller must not take as a
// time to wait for.
func (b *Budget) Open(now time.Time) (open bool, next time.Time) {
	if len(b.windows) == 0 {
		return true, now
	}
	for _, w := range b.windows {
		local := now.In(w.Location)
		// The latest opening at or before now: step forward from one window
		// length before now.
		start := w.Schedule.Next(local.Add(-w.Duration - time.Second))
		if !start.After(local) && local.Before(start.Add(w.Duration)) {
			return true, now
		}
		// A zero time is the cron library's "never": not a next opening.
		if n := w.Schedule.Next(local); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return false, next
}

// Acquire takes a slot for node on behalf of component. It fails when the
// budget is spent or the node already holds a slot.
func (b *Budget) Acquire(node, component string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if holder, ok := b.holders[node]; ok {
		return fmt.Errorf("node %s is already being drained by the %s", node, holder)
	}
	if len(b.holders) >= b.max {
		return b.spent()
	}
	b.holders[node] = component
	return nil
}

// Spent returns why no slot is free now (the error Acquire would give a node
// not draining), or nil when one is.
func (b *Budget) Spent() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.holders) >= b.max {
		return b.spent()
	}
	return nil
}

// spent is the error of a budget with no slot free; b.mu is held.
func (b *Budget) spent() error {
	return fmt.Errorf("disruption budget spent: %d of %d concurrent drains in progress (%s)", len(b.holders), b.max, b.describe())
}

// Release returns node's slot.
func (b *Budget) Release(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.holders, node)
}

// InUse is the number of slots taken.
func (b *Budget) InUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.holders)
}

func (b *Budget) describe() string {
	var parts []string
	for node, c := range b.holders {
		parts = append(parts, node+" by the "+c)
	}
	return fmt.Sprint(parts)
}

// ConsolidationHold is how long an on-demand node that a consolidation sent
// pods to is not consolidated itself, by any controller: measured in `spotter
// simulate`, two on-demand nodes otherwise sent the same pinned pods to each
// other every few minutes, the rescheduler consolidating one and the
// migrator, or the rescheduler again, the other, each planned as saving a
// node.
const ConsolidationHold = time.Hour

// Received records that a consolidation (of any controller) sent pods to the
// on-demand node at at.
func (b *Budget) Received(node string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.received[node] = at
}

// RecentlyReceived reports whether a consolidation sent pods to node less
// than ConsolidationHold before now: such a node is not consolidated itself.
func (b *Budget) RecentlyReceived(node string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n, at := range b.received {
		if now.Sub(at) >= ConsolidationHold {
			delete(b.received, n)
		}
	}
	_, ok := b.received[node]
	return ok
}
