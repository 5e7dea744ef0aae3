package gcp

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/notice"
)

// FuzzAnswers runs the source's handling of a key's answers (as watchKey
// does, without HTTP) on fuzzed values of instance/preempted and
// instance/maintenance-event, each followed by itself, then by a notice and
// by its end. It checks that every notice sent is well-formed, that a value
// read again sends nothing, that a bad value changes nothing, and that the
// notice after fuzzed values is never missed, nor its end.
func FuzzAnswers(f *testing.F) {
	for _, s := range [][2]string{
		{"TRUE", "TERMINATE_ON_HOST_MAINTENANCE"}, {"FALSE", "NONE"}, {"TRUE\n", "MIGRATE_ON_HOST_MAINTENANCE"},
		{"", ""}, {"true", "none"}, {"<html>", "SOMETHING_NEW"}, {"\x00", "MIGRATE ON HOST"}, {"TRUEFALSE", "\xff\xfe"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, preempted, maintenance []byte) {
		clk := testingclock.NewFakeClock(start)
		src, err := New(Config{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			k           key
			fuzzed      []byte
			on, off     string
			kind        notice.Kind
			noticeAfter time.Duration
		}{
			{key{path: PreemptedPath, id: PreemptedID, notice: src.preempted}, preempted, "TRUE", "FALSE", notice.Termination, PreemptionNotice},
			{key{path: MaintenanceEventPath, id: MaintenanceEventID, notice: src.maintenance}, maintenance, MaintenanceTerminate, MaintenanceNone, notice.Maintenance, MaintenanceNotice},
		} {
			var tracker watch.Tracker
			read := func(v []byte) (sent []notice.Notice, err error) {
				n, ok, err := src.handle(tc.k, &tracker, v)
				if err != nil {
					if ok {
						t.Errorf("%s %q: a notice with the error %v", tc.k.path, v, err)
					}
					return nil, err
				}
				if ok && tracker.Changed(n) {
					if n.Cloud != notice.CloudGCP || n.ID != tc.k.id || n.Kind != tc.kind || n.Action == "" || n.Deadline.IsZero() {
						t.Errorf("%s %q: malformed notice %+v", tc.k.path, v, n)
					}
					sent = append(sent, n)
				}
				return sent, nil
			}
			before, _ := tracker.Last(tc.k.id)
			if _, err := read(tc.fuzzed); err != nil {
				if after, _ := tracker.Last(tc.k.id); after != before {
					t.Errorf("%s %q: a bad value changed the record to %+v", tc.k.path, tc.fuzzed, after)
				}
			}
			clk.Step(time.Second)
			if again, _ := read(tc.fuzzed); len(again) != 0 {
				t.Errorf("%s %q read again sent %+v", tc.k.path, tc.fuzzed, again)
			}
			// The notice after any value: open, due by the documented window.
			if _, err := read([]byte(tc.on)); err != nil {
				t.Fatal(err)
			}
			if last, ok := tracker.Last(tc.k.id); !ok || last.Ended || last.Kind != tc.kind || last.Deadline.After(clk.Now().Add(tc.noticeAfter)) {
				t.Errorf("%s %q then %s: notice %+v, want one open and due within %v", tc.k.path, tc.fuzzed, tc.on, last, tc.noticeAfter)
			}
			ended, err := read([]byte(tc.off))
			if err != nil {
				t.Fatal(err)
			}
			if len(ended) != 1 || !ended[0].Ended {
				t.Errorf("%s %q, %s then %s sent %+v, want the end of the notice", tc.k.path, tc.fuzzed, tc.on, tc.off, ended)
			}
		}
	})
}
