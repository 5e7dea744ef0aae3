package v1alpha1

import (
	"strings"
	"testing"
)

// A schedule that never fires, or fires in some years only, is refused with
// its field path, why and how to fix it: the controllers wait for its next
// time, and the cron library answers "never" with a zero time.
func TestScheduleMustFireEveryYear(t *testing.T) {
	cases := []struct {
		name, expr string
		want       string // "" when the schedule is valid
	}{
		{"hourly", "0 * * * *", ""},
		{"weekday evenings", "0 22 * * 1-5", ""},
		{"descriptor", "@daily", ""},
		{"yearly", "@yearly", ""},
		{"once a year on the last day", "59 23 31 12 *", ""},
		// Every year has a Friday the 13th, though up to 14 months apart.
		{"friday the 13th", "0 0 13 * 5", ""},
		// Day of month and day of week both restricted: either matches (cron's
		// rule), so this runs every Monday.
		{"february 29 or a monday", "0 0 29 2 1", ""},
		{"february 30", "0 0 30 2 *", "never fires: no date matches it"},
		{"april 31", "0 0 31 4 *", "never fires: no date matches it"},
		{"february 29", "0 0 29 2 *", "does not fire in every year (none in 2001)"},
		{"every 10000 hours", "@every 10000h", "does not fire in every year (none in 2001)"},
		{"syntax", "every hour", "not a cron schedule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchedule(tc.expr)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ParseSchedule(%q): %v", tc.expr, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "not a cron schedule")) {
				t.Errorf("ParseSchedule(%q) = %v, want an error containing %q", tc.expr, err, tc.want)
			}

			c := NewDefaults()
			c.Migrator.Schedule = tc.expr
			c.Disruption.Windows = []Window{{Schedule: tc.expr, Duration: c.Rescheduler.Interval, TimeZone: "UTC"}}
			c.Disruption.Windows[0].Duration.Duration *= 60
			errs := Validate(c)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("Validate: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 2 {
				t.Fatalf("Validate: %d problems, want 2 (both fields):\n%v", len(errs), errs.ToAggregate())
			}
			for i, path := range []string{"disruption.windows[0].schedule", "migrator.schedule"} {
				got := errs[i].Error()
				if !strings.HasPrefix(got, path+": Invalid value: \""+tc.expr+"\"") || !strings.Contains(got, tc.want) {
					t.Errorf("problem %d:\n got %s\nwant %s: ... %s", i, got, path, tc.want)
				}
			}
		})
	}
}
