package interrupt

import (
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func TestSoonestDrain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New(nil, nil, nil, nil, nil, Options{RebalanceAction: v1alpha1.ActionTaint, MaintenanceAction: v1alpha1.ActionDrain})
	h.seen = map[string]notice.Notice{
		"aws/reboot-next-week": {Kind: notice.Maintenance, Action: "system-reboot", Deadline: now.Add(7 * 24 * time.Hour)},
		"aws/retire-in-2-days": {Kind: notice.Maintenance, Action: "instance-retirement", Deadline: now.Add(48 * time.Hour)},
		"aws/rebalance":        {Kind: notice.Rebalance, Action: "rebalance"},
		"aws/ended":            {Kind: notice.Maintenance, Action: "system-reboot", Deadline: now.Add(time.Hour), Ended: true},
	}
	if _, key, ok := h.soonestDrain("none"); !ok || key != "aws/retire-in-2-days" {
		t.Errorf("soonest drain %q %v, want the retirement in two days (the ended event and the taint-only rebalance do not drain)", key, ok)
	}
	if _, key, ok := h.soonestDrain("aws/retire-in-2-days"); !ok || key != "aws/reboot-next-week" {
		t.Errorf("after the retirement ended: %q %v, want the reboot next week", key, ok)
	}
	if earlier(time.Time{}, now) || !earlier(now, time.Time{}) {
		t.Error("a notice without a deadline must come after any deadline")
	}
}

func TestLevel(t *testing.T) {
	cases := []struct {
		n    notice.Notice
		want v1alpha1.NoticeAction
	}{
		{notice.Notice{Kind: notice.Termination}, v1alpha1.ActionDrain},
		{notice.Notice{Kind: notice.Rebalance}, v1alpha1.ActionCordon},
		{notice.Notice{Kind: notice.Maintenance, Action: "TERMINATE_ON_HOST_MAINTENANCE"}, v1alpha1.ActionDrain},
		{notice.Notice{Kind: notice.Maintenance, Action: "MIGRATE_ON_HOST_MAINTENANCE"}, v1alpha1.ActionTaint},
	}
	for _, c := range cases {
		if got := Level(c.n, v1alpha1.ActionCordon, v1alpha1.ActionDrain); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.n.Kind, c.n.Action, got, c.want)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d := DrainDeadline(notice.Notice{Deadline: now.Add(30 * time.Second)}, 5*time.Second, now); !d.Equal(now.Add(25 * time.Second)) {
		t.Errorf("deadline %s, want the notice's less the margin", d)
	}
	if d := DrainDeadline(notice.Notice{Deadline: now.Add(2 * time.Second)}, 5*time.Second, now); !d.Equal(now.Add(time.Second)) {
		t.Errorf("late notice: deadline %s, want a second from now", d)
	}
	if d := DrainDeadline(notice.Notice{}, 5*time.Second, now); !d.IsZero() {
		t.Errorf("no deadline: %s, want none", d)
	}
}
