package aws

import (
	"testing"
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
