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
	windows []window
}

type window struct {
	schedule cron.Schedule
	duration time.Duration
	loc      *time.Location
	text     string
}

// New returns the budget the configuration describes.
func New(cfg v1alpha1.DisruptionConfig) (*Budget, error) {
	b := &Budget{max: int(cfg.MaxConcurrentDrains), holders: map[string]string{}}
	if b.max < 1 {
		b.max = 1
	}
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
		b.windows = append(b.windows, window{schedule: sched, duration: w.Duration.Duration, loc: loc, text: w.Schedule + " for " + w.Duration.Duration.String()})
	}
	return b, nil
}

// Open reports whether voluntary drains are allowed at now: always when no
// window is configured, else when now falls inside one. When closed, next is
// when the next window opens.
func (b *Budget) Open(now time.Time) (open bool, next time.Time) {
	if len(b.windows) == 0 {
		return true, now
	}
	for _, w := range b.windows {
		local := now.In(w.loc)
		// The latest opening at or before now: step forward from one window
		// length before now.
		start := w.schedule.Next(local.Add(-w.duration - time.Second))
		if !start.After(local) && local.Before(start.Add(w.duration)) {
			return true, now
		}
		if n := w.schedule.Next(local); next.IsZero() || n.Before(next) {
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
		return fmt.Errorf("disruption budget spent: %d of %d concurrent drains in progress (%s)", len(b.holders), b.max, b.describe())
	}
	b.holders[node] = component
	return nil
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
