package aws

import (
	"testing"
	"time"
)

func TestParseInstanceAction(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    InstanceAction
		wantErr bool
	}{
		{name: "terminate", in: `{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`, want: InstanceAction{"terminate", time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{name: "stop", in: `{"action":"stop","time":"2017-09-18T08:22:00Z"}`, want: InstanceAction{"stop", time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{name: "hibernate", in: `{"action":"hibernate","time":"2017-09-18T08:22:00Z"}`, want: InstanceAction{"hibernate", time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{name: "offset normalized to UTC", in: `{"action":"stop","time":"2017-09-18T10:22:00+02:00"}`, want: InstanceAction{"stop", time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{name: "unknown field ignored", in: `{"action":"stop","time":"2017-09-18T08:22:00Z","extra":1}`, want: InstanceAction{"stop", time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{name: "no time", in: `{"action":"terminate"}`, wantErr: true},
		{name: "no action", in: `{"time":"2017-09-18T08:22:00Z"}`, wantErr: true},
		{name: "empty action", in: `{"action":"","time":"2017-09-18T08:22:00Z"}`, wantErr: true},
		{name: "bad time", in: `{"action":"terminate","time":"18 Sep 2017"}`, wantErr: true},
		{name: "action not a word", in: `{"action":"terminate now","time":"2017-09-18T08:22:00Z"}`, wantErr: true},
		{name: "not JSON", in: `<html>404</html>`, wantErr: true},
		{name: "empty", in: ``, wantErr: true},
		{name: "array", in: `[]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseInstanceAction([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && (got.Action != tt.want.Action || !got.Time.Equal(tt.want.Time)) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseRebalanceRecommendation(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Time
		wantErr bool
	}{
		{name: "documented example", in: `{"noticeTime": "2020-10-27T08:22:00Z"}`, want: time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC)},
		{name: "missing noticeTime", in: `{}`, wantErr: true},
		{name: "bad time", in: `{"noticeTime":"yesterday"}`, wantErr: true},
		{name: "not JSON", in: `noticeTime`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRebalanceRecommendation([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !got.NoticeTime.Equal(tt.want) {
				t.Errorf("got %v, want %v", got.NoticeTime, tt.want)
			}
		})
	}
}

// documentedScheduledEvents is the example of the EC2 User Guide.
const documentedScheduledEvents = `[
  {
    "NotBefore" : "21 Jan 2019 09:00:43 GMT",
    "Code" : "system-reboot",
    "Description" : "scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32",
    "NotAfter" : "21 Jan 2019 09:17:23 GMT",
    "State" : "active"
  }
]`

func TestParseScheduledEvents(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []ScheduledEvent
		wantErr bool
		// problems are the indexes of the entries reported as problems, and
		// whether each was skipped.
		problems map[int]bool
	}{
		{name: "documented example", in: documentedScheduledEvents, want: []ScheduledEvent{{
			Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-0d59937288b749b32",
			NotBefore: time.Date(2019, 1, 21, 9, 0, 43, 0, time.UTC), NotAfter: time.Date(2019, 1, 21, 9, 17, 23, 0, time.UTC), State: "active",
		}}},
		{name: "deadline and single-digit day", in: `[{"Code":"instance-stop","EventId":"instance-event-1","NotBefore":"1 Feb 2019 09:00:43 GMT","NotBeforeDeadline":"9 Feb 2019 00:00:00 GMT","State":"canceled"}]`, want: []ScheduledEvent{{
			Code: "instance-stop", EventID: "instance-event-1", NotBefore: time.Date(2019, 2, 1, 9, 0, 43, 0, time.UTC),
			NotBeforeDeadline: time.Date(2019, 2, 9, 0, 0, 0, 0, time.UTC), State: "canceled",
		}}},
		{name: "empty array", in: `[]`, want: nil},
		{name: "empty body", in: ``, want: nil},
		{name: "null", in: `null`, want: nil},
		{name: "missing EventId: skipped", in: `[{"Code":"system-reboot","State":"active"}]`, problems: map[int]bool{0: true}},
		{name: "missing Code: skipped", in: `[{"EventId":"instance-event-1","State":"active"}]`, problems: map[int]bool{0: true}},
		{name: "RFC 3339 date: kept without it", in: `[{"Code":"system-reboot","EventId":"instance-event-1","NotBefore":"2019-01-21T09:00:43Z"}]`,
			want: []ScheduledEvent{{Code: "system-reboot", EventID: "instance-event-1"}}, problems: map[int]bool{0: false}},
		{name: "mixed good and bad entries", in: `[null, 1, "x", [], {"Code":"system-reboot","EventId":7}, {"Code":"a b","EventId":"e1"},
			{"Code":"system-reboot","EventId":"e2","State":"not a word","Description":5,"NotAfter":"soon"},
			{"Code":"instance-stop","EventId":"e3","NotBefore":"1 Feb 2019 09:00:43 GMT","State":"active"}]`,
			want: []ScheduledEvent{{Code: "system-reboot", EventID: "e2"},
				{Code: "instance-stop", EventID: "e3", NotBefore: time.Date(2019, 2, 1, 9, 0, 43, 0, time.UTC), State: "active"}},
			problems: map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: false}},
		{name: "object, not array", in: `{"Code":"system-reboot"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems, err := ParseScheduledEvents([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(problems) != len(tt.problems) {
				t.Errorf("problems %+v, want entries %v", problems, tt.problems)
			}
			for _, p := range problems {
				if skipped, ok := tt.problems[p.Index]; !ok || skipped != p.Skipped || p.Err == nil {
					t.Errorf("problem %+v, want entries %v (true: skipped)", p, tt.problems)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Code != w.Code || g.Description != w.Description || g.EventID != w.EventID || g.State != w.State ||
					!g.NotBefore.Equal(w.NotBefore) || !g.NotAfter.Equal(w.NotAfter) || !g.NotBeforeDeadline.Equal(w.NotBeforeDeadline) {
					t.Errorf("[%d] = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestScheduledEventEnded(t *testing.T) {
	for state, want := range map[string]bool{"active": false, "canceled": true, "completed": true, "": false} {
		if got := (ScheduledEvent{State: state}).Ended(); got != want {
			t.Errorf("Ended() with State %q = %v, want %v", state, got, want)
		}
	}
}

func TestParseTargetLifecycleState(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "InService", want: "InService"},
		{in: "Terminated\n", want: "Terminated"},
		{in: "Warmed:Hibernated", want: "Warmed:Hibernated"},
		{in: "", wantErr: true},
		{in: "In Service", wantErr: true},
		{in: "<html>", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTargetLifecycleState([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTargetLifecycleState(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
