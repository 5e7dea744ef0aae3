package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"spotter.dev/spotter/internal/agent/internal/entries"
)

// TimeLayout is the layout of NotBefore: RFC 1123 in GMT, for example
// "Mon, 19 Sep 2016 18:29:47 GMT".
const TimeLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

// Event types of Scheduled Events.
const (
	EventFreeze    = "Freeze"
	EventReboot    = "Reboot"
	EventRedeploy  = "Redeploy"
	EventPreempt   = "Preempt"
	EventTerminate = "Terminate"
)

// Event statuses.
const (
	StatusScheduled = "Scheduled"
	StatusStarted   = "Started"
)

// Document is a Scheduled Events document.
type Document struct {
	// Incarnation (DocumentIncarnation) changes whenever the events change.
	Incarnation int64
	// Events are the events scheduled for the VMs of the availability set or
	// scale-set placement group, this one or others (see Resources).
	Events []Event
	// Problems are the malformed events: left out of Events, or kept without
	// a malformed field. The other events are read as if they were not there.
	Problems []EventProblem
}

// EventProblem is one malformed event of a document.
type EventProblem = entries.Problem

// Event is one scheduled event.
type Event struct {
	// EventID identifies the event; it is what an acknowledgement names.
	EventID string
	// EventType is Freeze, Reboot, Redeploy, Preempt or Terminate.
	EventType string
	// ResourceType is VirtualMachine.
	ResourceType string
	// Resources are the names of the VMs the event affects.
	Resources []string
	// EventStatus is Scheduled, or Started once approved or past NotBefore.
	EventStatus string
	// NotBefore is when the event may start at the earliest; zero when the
	// event has started (or when it did not parse, see ParseDocument).
	NotBefore time.Time
	// Description says what will happen, for people.
	Description string
	// EventSource is Platform or User.
	EventSource string
	// DurationInSeconds is the expected interruption; -1 or 0 when unknown.
	DurationInSeconds int
}

// ParseDocument parses the body of GET /metadata/scheduledevents, for example
//
//	{"DocumentIncarnation": 2, "Events": [{"EventId": "C7061BAC-...",
//	 "EventType": "Preempt", "ResourceType": "VirtualMachine",
//	 "Resources": ["myvmss_1"], "EventStatus": "Scheduled",
//	 "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "",
//	 "EventSource": "Platform", "DurationInSeconds": -1}]}
//
// The document must be JSON with a DocumentIncarnation and, when present, an
// array of Events; otherwise it is an error. Each event is then read on its
// own, so that one malformed event, maybe another VM's, does not hide the
// others: an event that is not an object, lacks an EventId or an EventType, or
// whose Resources is not a list of names is left out (it cannot be told apart
// or matched to a VM); a malformed NotBefore, DurationInSeconds or text field
// is dropped (NotBefore zero, DurationInSeconds -1) and the event kept. Both
// are reported in Document.Problems.
func ParseDocument(b []byte) (Document, error) {
	var raw struct {
		DocumentIncarnation *int64            `json:"DocumentIncarnation"`
		Events              []json.RawMessage `json:"Events"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Document{}, fmt.Errorf("scheduled events document: %w", err)
	}
	if raw.DocumentIncarnation == nil {
		return Document{}, errors.New("scheduled events document: want the field DocumentIncarnation")
	}
	doc := Document{Incarnation: *raw.DocumentIncarnation}
	doc.Events, doc.Problems = entries.Parse(raw.Events, "scheduled events document: Events", func(e Event) string { return e.EventID }, parseEvent)
	return doc, nil
}

// parseEvent reads one event. skipped says it must be left out; err, when
// not nil, says what is wrong (with skipped false: the fields dropped). The
// EventID of a skipped event is set when it could be read.
func parseEvent(b json.RawMessage) (e Event, skipped bool, err error) {
	var raw struct {
		EventID           json.RawMessage `json:"EventId"`
		EventType         json.RawMessage `json:"EventType"`
		ResourceType      json.RawMessage `json:"ResourceType"`
		Resources         json.RawMessage `json:"Resources"`
		EventStatus       json.RawMessage `json:"EventStatus"`
		NotBefore         json.RawMessage `json:"NotBefore"`
		Description       json.RawMessage `json:"Description"`
		EventSource       json.RawMessage `json:"EventSource"`
		DurationInSeconds json.RawMessage `json:"DurationInSeconds"`
	}
	if err := entries.Object(b, &raw); err != nil {
		return Event{}, true, err
	}
	e.DurationInSeconds = -1
	var f entries.Fields
	field := f.Decode
	if field("EventId", raw.EventID, &e.EventID) && strings.TrimSpace(e.EventID) == "" {
		f.Add(errors.New("want an EventId"))
	}
	if field("EventType", raw.EventType, &e.EventType) && strings.TrimSpace(e.EventType) == "" {
		f.Add(errors.New("want an EventType"))
	}
	field("Resources", raw.Resources, &e.Resources)
	if f.Failed() {
		if strings.TrimSpace(e.EventID) == "" {
			e.EventID = ""
		}
		return Event{EventID: e.EventID}, true, f.Err()
	}
	field("ResourceType", raw.ResourceType, &e.ResourceType)
	field("EventStatus", raw.EventStatus, &e.EventStatus)
	field("Description", raw.Description, &e.Description)
	field("EventSource", raw.EventSource, &e.EventSource)
	var d *int
	if field("DurationInSeconds", raw.DurationInSeconds, &d) && d != nil {
		e.DurationInSeconds = *d
	}
	var notBefore string
	if field("NotBefore", raw.NotBefore, &notBefore) && notBefore != "" {
		t, err := time.Parse(TimeLayout, notBefore)
		if err != nil {
			f.Add(fmt.Errorf("NotBefore: %w", err))
		} else {
			e.NotBefore = t
		}
	}
	return e, false, f.Err()
}

// Affects reports whether the event names the VM vmName among its Resources
// (Azure names compare case-insensitively).
func (e Event) Affects(vmName string) bool {
	for _, r := range e.Resources {
		if strings.EqualFold(r, vmName) {
			return true
		}
	}
	return false
}

// ErrNoProviderID is returned by ResourceName for an empty provider ID.
var ErrNoProviderID = errors.New("empty provider ID")

// ResourceName returns the name Scheduled Events use for the VM whose node
// has providerID (node.spec.providerID):
//
//   - a scale-set VM,
//     azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/<vmss>/virtualMachines/<id>,
//     is "<vmss>_<id>";
//   - a VM, azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/<name>,
//     is "<name>".
//
// An empty providerID returns ErrNoProviderID: ask the metadata service for
// the name instead (compute/name).
func ResourceName(providerID string) (string, error) {
	if providerID == "" {
		return "", ErrNoProviderID
	}
	rest, ok := strings.CutPrefix(providerID, "azure://")
	if !ok {
		return "", fmt.Errorf("provider ID %q: want the form azure:///subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/<type>/<name>", providerID)
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	// subscriptions S resourceGroups RG providers Microsoft.Compute <type> <name> [virtualMachines <id>]
	if len(parts) < 8 || !strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourceGroups") ||
		!strings.EqualFold(parts[4], "providers") || !strings.EqualFold(parts[5], "Microsoft.Compute") {
		return "", fmt.Errorf("provider ID %q: want the form azure:///subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/<type>/<name>", providerID)
	}
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("provider ID %q: empty path segment", providerID)
		}
	}
	switch {
	case len(parts) == 8 && strings.EqualFold(parts[6], "virtualMachines"):
		return parts[7], nil
	case len(parts) == 10 && strings.EqualFold(parts[6], "virtualMachineScaleSets") && strings.EqualFold(parts[8], "virtualMachines"):
		return parts[7] + "_" + parts[9], nil
	default:
		return "", fmt.Errorf("provider ID %q: want .../virtualMachines/<name> or .../virtualMachineScaleSets/<vmss>/virtualMachines/<id>", providerID)
	}
}
