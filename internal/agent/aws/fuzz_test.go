package aws

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/notice"
)

// The fuzz tests check that every parser of metadata answers returns an error
// rather than panicking, and that what it accepts is well-formed. Their seed
// corpus runs in every `go test`.

func FuzzParseInstanceAction(f *testing.F) {
	for _, s := range []string{
		`{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`,
		`{"action":"hibernate","time":"2017-09-18T10:22:00.5+02:00"}`,
		`{"action":null,"time":"2017-09-18T08:22:00Z"}`,
		`{"action":"stop","time":1}`, `[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseInstanceAction(b)
		if err == nil && a.Action == "" {
			t.Errorf("accepted %q with an empty action", b)
		}
	})
}

func FuzzParseRebalanceRecommendation(f *testing.F) {
	for _, s := range []string{`{"noticeTime": "2020-10-27T08:22:00Z"}`, `{"noticeTime":""}`, `{}`, `"x"`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseRebalanceRecommendation(b)
	})
}

func FuzzParseScheduledEvents(f *testing.F) {
	for _, s := range []string{
		documentedScheduledEvents, `[]`, ``, `null`, `[{}]`, `[null]`,
		`[{"Code":"instance-stop","EventId":"e","NotBefore":"31 Feb 2019 09:00:43 GMT"}]`,
		`[{"Code":"instance-stop","EventId":"e","NotAfter":"1 Jan 0000 00:00:00 GMT","State":"completed"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		events, _, err := ParseScheduledEvents(b)
		if err != nil {
			return
		}
		for _, e := range events {
			if e.EventID == "" || e.Code == "" {
				t.Errorf("accepted an event without EventId or Code: %+v", e)
			}
		}
	})
}

func FuzzParseTargetLifecycleState(f *testing.F) {
	for _, s := range []string{"InService", "Terminated\n", "Warmed:Pending:Wait", "", " ", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseTargetLifecycleState(b)
		if err == nil && s == "" {
			t.Errorf("accepted %q as an empty state", b)
		}
	})
}

// FuzzDocuments runs the source's whole handling of the four items' answers
// (parsing, deadlines, what is sent, what ends) on fuzzed bodies, twice, then
// withdraws every item. It checks that every notice sent is well-formed, that
// a termination is never due in the past or beyond MaxInstanceActionLead, that
// unchanged answers send nothing, that withdrawn items end every open notice,
// and that a good scheduled event among fuzzed ones is always reported.
func FuzzDocuments(f *testing.F) {
	good := `{"action":"terminate","time":"2030-01-02T03:06:05Z"}`
	for _, s := range [][4]string{
		{good, `{"noticeTime":"2030-01-02T03:00:00Z"}`, documentedScheduledEvents, "Terminated"},
		{`{"action":"stop","time":"1970-01-01T00:00:00Z"}`, ``, `[]`, "InService"},
		{`{"action":"hibernate","time":"9999-12-31T23:59:59Z"}`, `{}`, `null`, ""},
		{`{"action":"terminate","time":"2030-01-02T03:04:05.999999999+14:00"}`, `x`, `[{}]`, "Warmed:Stopped"},
		// Mixed good and bad scheduled events.
		{good, ``, `[null, 7, {"Code":"a b","EventId":"e1"}, {"Code":"system-reboot","EventId":"e2","NotBefore":"soon"},
			{"Code":"instance-stop","EventId":"e3","NotBefore":"21 Jan 2030 09:00:43 GMT","State":"active"}]`, ""},
		{``, ``, `[{"Code":"instance-stop","EventId":"e3","State":"canceled","NotBefore":"31 Feb 2030 09:00:43 GMT"}, {"EventId":"e4"}]`, ""},
		// Two entries with one EventId.
		{``, ``, `[{"Code":"system-reboot","EventId":"e1","State":"active"}, {"Code":"instance-stop","EventId":"e1","State":"active"}]`, ""},
		{``, ``, `[{"Code":"system-reboot","EventId":"e1","State":"active"}, {"Code":"system-reboot","EventId":"e1","State":"completed"}]`, ""},
		// A scheduled event named like another item's notice.
		{``, `{"noticeTime":"2030-01-02T03:00:00Z"}`, `[{"Code":"system-reboot","EventId":"rebalance","State":"active"}]`, ""},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), []byte(s[2]), []byte(s[3]))
	}
	f.Fuzz(func(t *testing.T, action, rebalance, scheduled, lifecycle []byte) {
		clk := testingclock.NewFakeClock(start)
		src, err := New(Config{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		w := &watcher{Source: src, groups: map[string]map[string]bool{}}
		ctx := klog.NewContext(context.Background(), klog.Logger{}) // the zero logger discards
		bodies := map[string][]byte{InstanceActionPath: action, RebalancePath: rebalance, ScheduledEventsPath: scheduled, TargetLifecycleStatePath: lifecycle}
		round := func(withdrawn bool) []notice.Notice {
			var sent []notice.Notice
			for _, it := range items {
				resp := &watch.Response{Status: http.StatusOK, Body: bodies[it.path]}
				if withdrawn {
					resp = &watch.Response{Status: http.StatusNotFound}
				}
				ns, err := w.handle(ctx, it, resp)
				if err != nil && ns != nil {
					t.Errorf("%s: notices %+v with the error %v", it.path, ns, err)
				}
				sent = append(sent, ns...)
			}
			return sent
		}
		open := map[string]bool{}
		for _, n := range round(false) {
			if n.Cloud != notice.CloudAWS || n.ID == "" || n.Action == "" {
				t.Errorf("malformed notice %+v", n)
			}
			switch n.Kind {
			case notice.Termination:
				if n.Deadline.Before(start) || n.Deadline.After(start.Add(MaxInstanceActionLead)) {
					t.Errorf("termination %+v due outside [now, now+%v]", n, MaxInstanceActionLead)
				}
			case notice.Rebalance, notice.Maintenance:
			default:
				t.Errorf("notice %+v of unknown kind", n)
			}
			open[n.ID] = !n.Ended
		}
		clk.Step(time.Second)
		if again := round(false); len(again) != 0 {
			t.Errorf("the same answers again sent %+v", again)
		}
		for _, n := range round(true) {
			if !n.Ended || !open[n.ID] {
				t.Errorf("withdrawing every item sent %+v, want only open notices, Ended", n)
			}
			delete(open, n.ID)
		}
		for id, o := range open {
			if o {
				t.Errorf("notice %s still open after every item was withdrawn", id)
			}
		}

		// A good event among the fuzzed ones is reported.
		var entries []json.RawMessage
		if json.Unmarshal(scheduled, &entries) != nil {
			return
		}
		own := json.RawMessage(`{"Code":"system-reboot","EventId":"instance-event-fuzz-own","NotBefore":"21 Jan 2030 09:00:43 GMT","State":"active"}`)
		body, err := json.Marshal(append(entries, own))
		if err != nil {
			t.Fatal(err)
		}
		events, _, err := ParseScheduledEvents(body)
		if err != nil {
			t.Fatalf("a JSON array with a good event appended is refused: %v", err)
		}
		for _, e := range events[:len(events)-1] {
			if e.EventID == "instance-event-fuzz-own" {
				return // the fuzzer named an event like ours
			}
		}
		w = &watcher{Source: src, groups: map[string]map[string]bool{}}
		ns, err := w.handle(ctx, item{ScheduledEventsPath, (*watcher).scheduledEvents, false}, &watch.Response{Status: http.StatusOK, Body: body})
		if err != nil {
			t.Fatalf("events with a good one appended: %v", err)
		}
		found := false
		for _, n := range ns {
			found = found || (n.ID == "instance-event-fuzz-own" && n.Kind == notice.Maintenance && !n.Ended &&
				n.Deadline.Equal(time.Date(2030, 1, 21, 9, 0, 43, 0, time.UTC)))
		}
		if !found {
			t.Errorf("the good event among %s is not reported: %+v", scheduled, ns)
		}
	})
}
