package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
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
}

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
	// event has started.
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
// DocumentIncarnation is required; every event needs an EventId and an
// EventType, and a NotBefore that is not empty must parse.
func ParseDocument(b []byte) (Document, error) {
	var raw struct {
		DocumentIncarnation *int64 `json:"DocumentIncarnation"`
		Events              []struct {
			EventID           string   `json:"EventId"`
			EventType         string   `json:"EventType"`
			ResourceType      string   `json:"ResourceType"`
			Resources         []string `json:"Resources"`
			EventStatus       string   `json:"EventStatus"`
			NotBefore         string   `json:"NotBefore"`
			Description       string   `json:"Description"`
			EventSource       string   `json:"EventSource"`
			DurationInSeconds *int     `json:"DurationInSeconds"`
		} `json:"Events"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Document{}, fmt.Errorf("scheduled events document: %w", err)
	}
	if raw.DocumentIncarnation == nil {
		return Document{}, errors.New("scheduled events document: want the field DocumentIncarnation")
	}
	doc := Document{Incarnation: *raw.DocumentIncarnation, Events: make([]Event, 0, len(raw.Events))}
	for i, r := range raw.Events {
		if strings.TrimSpace(r.EventID) == "" || strings.TrimSpace(r.EventType) == "" {
			return Document{}, fmt.Errorf("scheduled events document: Events[%d]: want EventId and EventType", i)
		}
		e := Event{
			EventID: r.EventID, EventType: r.EventType, ResourceType: r.ResourceType, Resources: r.Resources,
			EventStatus: r.EventStatus, Description: r.Description, EventSource: r.EventSource, DurationInSeconds: -1,
		}
		if r.DurationInSeconds != nil {
			e.DurationInSeconds = *r.DurationInSeconds
		}
		if r.NotBefore != "" {
			t, err := time.Parse(TimeLayout, r.NotBefore)
			if err != nil {
				return Document{}, fmt.Errorf("scheduled events document: Events[%d] (%s): NotBefore: %w", i, r.EventID, err)
			}
			e.NotBefore = t
		}
		doc.Events = append(doc.Events, e)
	}
	return doc, nil
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
