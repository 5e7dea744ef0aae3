package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"spotter.dev/spotter/internal/agent/internal/entries"
)

// ScheduledEventTimeLayout is the layout of the dates in the scheduled-events
// document, for example "21 Jan 2019 09:00:43 GMT" (EC2 User Guide,
// "Instance metadata categories": events/maintenance/scheduled).
const ScheduledEventTimeLayout = "2 Jan 2006 15:04:05 GMT"

// InstanceAction is the spot instance-action document: the instance will be
// stopped, hibernated or terminated at Time.
type InstanceAction struct {
	// Action is terminate, stop or hibernate.
	Action string
	// Time is when the action happens (two minutes after the notice).
	Time time.Time
}

// ParseInstanceAction parses the body of spot/instance-action, for example
// {"action": "terminate", "time": "2017-09-18T08:22:00Z"}. Action must be a
// word (terminate, stop, hibernate; an unknown word is kept, because it still
// announces an interruption) and time an RFC 3339 UTC timestamp.
func ParseInstanceAction(b []byte) (InstanceAction, error) {
	var raw struct {
		Action *string `json:"action"`
		Time   *string `json:"time"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return InstanceAction{}, fmt.Errorf("spot instance-action: %w", err)
	}
	if raw.Action == nil || raw.Time == nil {
		return InstanceAction{}, errors.New("spot instance-action: want the fields action and time")
	}
	if !isWord(*raw.Action) {
		return InstanceAction{}, fmt.Errorf("spot instance-action: action %q is not a word", *raw.Action)
	}
	t, err := parseRFC3339(*raw.Time)
	if err != nil {
		return InstanceAction{}, fmt.Errorf("spot instance-action: time: %w", err)
	}
	return InstanceAction{Action: *raw.Action, Time: t}, nil
}

// RebalanceRecommendation is the events/recommendations/rebalance document.
type RebalanceRecommendation struct {
	// NoticeTime is when EC2 issued the recommendation.
	NoticeTime time.Time
}

// ParseRebalanceRecommendation parses the body of
// events/recommendations/rebalance, for example
// {"noticeTime": "2020-10-27T08:22:00Z"}.
func ParseRebalanceRecommendation(b []byte) (RebalanceRecommendation, error) {
	var raw struct {
		NoticeTime *string `json:"noticeTime"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return RebalanceRecommendation{}, fmt.Errorf("rebalance recommendation: %w", err)
	}
	if raw.NoticeTime == nil {
		return RebalanceRecommendation{}, errors.New("rebalance recommendation: want the field noticeTime")
	}
	t, err := parseRFC3339(*raw.NoticeTime)
	if err != nil {
		return RebalanceRecommendation{}, fmt.Errorf("rebalance recommendation: noticeTime: %w", err)
	}
	return RebalanceRecommendation{NoticeTime: t}, nil
}

// States of a scheduled event.
const (
	StateActive    = "active"
	StateCanceled  = "canceled"
	StateCompleted = "completed"
)

// ScheduledEvent is one entry of events/maintenance/scheduled.
type ScheduledEvent struct {
	// Code is the event type: instance-reboot, system-reboot,
	// system-maintenance, instance-retirement or instance-stop.
	Code string
	// Description says what will happen, for people.
	Description string
	// EventID identifies the event ("instance-event-0d59937288b749b32").
	EventID string
	// NotBefore is the start of the event's window; zero when absent.
	NotBefore time.Time
	// NotAfter is the end of the event's window; zero when absent.
	NotAfter time.Time
	// NotBeforeDeadline is the latest the event can be rescheduled to; zero
	// when absent.
	NotBeforeDeadline time.Time
	// State is active, canceled or completed.
	State string
}

// Ended reports whether the event was canceled or has completed.
func (e ScheduledEvent) Ended() bool {
	return e.State == StateCanceled || e.State == StateCompleted
}

// EventProblem is one malformed entry of events/maintenance/scheduled (see
// ParseScheduledEvents).
type EventProblem = entries.Problem

// ParseScheduledEvents parses the body of events/maintenance/scheduled: a JSON
// array of events whose dates use ScheduledEventTimeLayout. An empty array
// (or an empty body, or null) means no event; a body that is not a JSON array
// is an error. Each entry is then read on its own, so that one malformed
// entry does not hide the others: an entry that is not an object, or whose
// Code or EventId is missing or not a word, is left out; a State that is not a
// word, a Description that is not text or a date that does not parse is
// dropped (a date stays zero) and the event kept. Both are reported as
// problems.
func ParseScheduledEvents(b []byte) ([]ScheduledEvent, []EventProblem, error) {
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, fmt.Errorf("scheduled events: %w", err)
	}
	events, problems := entries.Parse(raw, "scheduled events: ", func(e ScheduledEvent) string { return e.EventID }, parseScheduledEvent)
	return events, problems, nil
}

// parseScheduledEvent reads one entry. skipped says it must be left out;
// err, when not nil, says what is wrong (with skipped false: the fields
// dropped). The EventID of a skipped entry is set when it could be read.
func parseScheduledEvent(b json.RawMessage) (e ScheduledEvent, skipped bool, err error) {
	var raw struct {
		Code              json.RawMessage `json:"Code"`
		Description       json.RawMessage `json:"Description"`
		EventID           json.RawMessage `json:"EventId"`
		NotAfter          json.RawMessage `json:"NotAfter"`
		NotBefore         json.RawMessage `json:"NotBefore"`
		NotBeforeDeadline json.RawMessage `json:"NotBeforeDeadline"`
		State             json.RawMessage `json:"State"`
	}
	if err := entries.Object(b, &raw); err != nil {
		return ScheduledEvent{}, true, err
	}
	var f entries.Fields
	text := func(name string, r json.RawMessage, out *string) bool { return f.Decode(name, r, out) }
	word := func(name string, r json.RawMessage, out *string, required bool) {
		var s string
		switch {
		case !text(name, r, &s):
		case s == "" && required:
			f.Add(fmt.Errorf("want the field %s", name))
		case s != "" && !isWord(s):
			f.Add(fmt.Errorf("%s %q is not a word", name, entries.Excerpt([]byte(s))))
		default:
			*out = s
		}
	}
	word("EventId", raw.EventID, &e.EventID, true)
	word("Code", raw.Code, &e.Code, true)
	if f.Failed() {
		return ScheduledEvent{EventID: e.EventID}, true, f.Err()
	}
	word("State", raw.State, &e.State, false)
	text("Description", raw.Description, &e.Description)
	for _, d := range []struct {
		name string
		in   json.RawMessage
		out  *time.Time
	}{{"NotBefore", raw.NotBefore, &e.NotBefore}, {"NotAfter", raw.NotAfter, &e.NotAfter}, {"NotBeforeDeadline", raw.NotBeforeDeadline, &e.NotBeforeDeadline}} {
		var s string
		if !text(d.name, d.in, &s) || s == "" {
			continue
		}
		t, err := time.Parse(ScheduledEventTimeLayout, s)
		if err != nil {
			f.Add(fmt.Errorf("%s: %w", d.name, err))
			continue
		}
		*d.out = t
	}
	return e, false, f.Err()
}

// TargetLifecycleStateTerminated is the Auto Scaling target lifecycle state of
// an instance the group is about to terminate.
const TargetLifecycleStateTerminated = "Terminated"

// ParseTargetLifecycleState parses the body of
// autoscaling/target-lifecycle-state: a single state such as InService,
// Terminated, Detached or Warmed:Stopped.
func ParseTargetLifecycleState(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 64 {
		return "", fmt.Errorf("target lifecycle state: want one state, got %q", b)
	}
	for _, r := range s {
		if !isWordRune(r) && r != ':' {
			return "", fmt.Errorf("target lifecycle state %q: unexpected character %q", s, r)
		}
	}
	return s, nil
}

// isWord reports whether s is a short identifier: letters, digits, '-', '_'.
func isWord(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !isWordRune(r) {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

func parseRFC3339(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}
