package disruption

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func TestAcquireRelease(t *testing.T) {
	b, err := New(v1alpha1.DisruptionConfig{MaxConcurrentDrains: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire("n1", "rescheduler"); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire("n1", "migrator"); err == nil || !strings.Contains(err.Error(), "already being drained by the rescheduler") {
		t.Errorf("same node twice: %v", err)
	}
	if err := b.Acquire("n2", "migrator"); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire("n3", "rescheduler"); err == nil || !strings.Contains(err.Error(), "2 of 2 concurrent drains") {
		t.Errorf("third drain with a budget of two: %v", err)
	}
	b.Release("n1")
	if err := b.Acquire("n3", "rescheduler"); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if b.InUse() != 2 {
		t.Errorf("in use %d", b.InUse())
	}
}

func TestWindows(t *testing.T) {
	b, err := New(v1alpha1.DisruptionConfig{Windows: []v1alpha1.Window{
		{Schedule: "0 22 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, TimeZone: "Europe/Berlin"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	cases := []struct {
		at   time.Time
		open bool
		next time.Time
	}{
		{time.Date(2026, 11, 23, 21, 59, 0, 0, berlin), false, time.Date(2026, 11, 23, 22, 0, 0, 0, berlin)}, // Monday
		{time.Date(2026, 11, 23, 22, 0, 0, 0, berlin), true, time.Time{}},
		{time.Date(2026, 11, 24, 5, 59, 0, 0, berlin), true, time.Time{}},
		{time.Date(2026, 11, 24, 6, 0, 0, 0, berlin), false, time.Date(2026, 11, 24, 22, 0, 0, 0, berlin)},
		{time.Date(2026, 11, 28, 23, 0, 0, 0, berlin), false, time.Date(2026, 11, 30, 22, 0, 0, 0, berlin)}, // Saturday
		{time.Date(2026, 11, 28, 3, 0, 0, 0, berlin), true, time.Time{}},                                    // Friday night's window
	}
	for _, tc := range cases {
		open, next := b.Open(tc.at)
		if open != tc.open || (!open && !next.Equal(tc.next)) {
			t.Errorf("at %s: open=%v next=%s, want open=%v next=%s", tc.at, open, next, tc.open, tc.next)
		}
	}
	always, _ := New(v1alpha1.DisruptionConfig{})
	if open, _ := always.Open(time.Now()); !open {
		t.Error("no windows must mean always open")
	}
}

// never is a schedule with no next activation: the cron library returns a
// zero time for an expression no date matches.
type never struct{}

func (never) Next(time.Time) time.Time { return time.Time{} }

// A window that never opens does not hide the next opening of the others,
// and a budget whose windows never open says so with a zero next time, never a
// time in the past.
func TestWindowThatNeverOpens(t *testing.T) {
	daily, err := v1alpha1.ParseSchedule("@daily")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	b := NewWithWindows(1, Window{Schedule: daily, Duration: time.Hour}, Window{Schedule: never{}, Duration: time.Hour})
	if open, next := b.Open(now); open || !next.Equal(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("daily and never: open=%v next=%s, want closed until midnight", open, next)
	}
	b = NewWithWindows(1, Window{Schedule: never{}, Duration: time.Hour})
	if open, next := b.Open(now); open || !next.IsZero() {
		t.Errorf("never: open=%v next=%s, want closed with no next opening", open, next)
	}
}

// Configured schedules that never fire, or in some years only, are refused.
func TestNewRefusesSchedulesThatDoNotFireEveryYear(t *testing.T) {
	for _, expr := range []string{"0 0 30 2 *", "0 0 29 2 *"} {
		_, err := New(v1alpha1.DisruptionConfig{Windows: []v1alpha1.Window{{Schedule: expr, Duration: metav1.Duration{Duration: time.Hour}}}})
		if err == nil || !strings.HasPrefix(err.Error(), "disruption.windows[0].schedule: ") {
			t.Errorf("New with schedule %q: %v, want an error naming the field", expr, err)
		}
	}
}

// A node a consolidation sent pods to is held for ConsolidationHold, then
// forgotten.
func TestRecentlyReceived(t *testing.T) {
	b := NewWithWindows(1)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.Received("od-1", at)
	if !b.RecentlyReceived("od-1", at.Add(ConsolidationHold-time.Second)) {
		t.Error("od-1 not held within the hold")
	}
	if b.RecentlyReceived("od-2", at) {
		t.Error("od-2 held, but received nothing")
	}
	if b.RecentlyReceived("od-1", at.Add(ConsolidationHold)) {
		t.Error("od-1 still held once the hold ended")
	}
}
