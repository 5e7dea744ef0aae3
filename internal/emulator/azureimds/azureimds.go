// Package azureimds emulates the parts of the Azure Instance Metadata Service
// that spotter-agent uses: Scheduled Events (GET the document, POST
// StartRequests) and the VM's name. It is strict like the real service: every
// request needs the header Metadata: true and a supported api-version, and
// DocumentIncarnation changes with every change of the events.
//
// Tests drive it with AddEvent, StartEvent and RemoveEvent; a separate process
// can do the same through the control API under /_emulator/ (see ServeHTTP).
package azureimds

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// Paths the emulator serves.
const (
	ScheduledEventsPath = "/metadata/scheduledevents"
	InstancePath        = "/metadata/instance"
	VMNamePath          = "/metadata/instance/compute/name"
)

// TimeLayout is the layout of NotBefore.
const TimeLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

// API versions the emulator accepts, per service.
var (
	ScheduledEventsVersions = []string{"2017-11-01", "2019-01-01", "2019-08-01", "2020-07-01"}
	InstanceVersions        = []string{"2017-08-01", "2018-10-01", "2019-06-01", "2020-09-01", "2021-02-01", "2021-12-13", "2023-07-01"}
)

// Event is one scheduled event. AddEvent fills in ResourceType
// (VirtualMachine), EventStatus (Scheduled), EventSource (Platform) and
// DurationInSeconds (-1) when empty; a zero NotBefore is sent as "".
type Event struct {
	EventID           string   `json:"EventId"`
	EventType         string   `json:"EventType"` // Freeze, Reboot, Redeploy, Preempt, Terminate
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"` // Scheduled, Started
	NotBefore         time.Time
	Description       string `json:"Description"`
	EventSource       string `json:"EventSource"` // Platform, User
	DurationInSeconds int    `json:"DurationInSeconds"`
}

// Options configure a Server.
type Options struct {
	// VMName is this VM's name, served at compute/name. Default "spot-node-1".
	VMName string
}

// Server is the emulated metadata service; an http.Handler. It is safe for
// concurrent use.
type Server struct {
	vmName  string
	refusal emulatorkit.Refusal

	mu          sync.Mutex
	incarnation int64
	events      []Event
	acks        []string
	requests    map[string]int
}

// New returns a metadata service with no event, at DocumentIncarnation 1.
func New(opts Options) *Server {
	if opts.VMName == "" {
		opts.VMName = "spot-node-1"
	}
	return &Server{vmName: opts.VMName, incarnation: 1, requests: map[string]int{}}
}

// VMName returns the VM's name, as in Resources.
func (s *Server) VMName() string { return s.vmName }

// AddEvent schedules e, or replaces the event with its EventID, and bumps
// DocumentIncarnation.
func (s *Server) AddEvent(e Event) {
	if e.ResourceType == "" {
		e.ResourceType = "VirtualMachine"
	}
	if e.EventStatus == "" {
		e.EventStatus = "Scheduled"
	}
	if e.EventSource == "" {
		e.EventSource = "Platform"
	}
	if e.DurationInSeconds == 0 {
		e.DurationInSeconds = -1
	}
	e.Resources = slices.Clone(e.Resources)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.incarnation++
	for i := range s.events {
		if s.events[i].EventID == e.EventID {
			s.events[i] = e
			return
		}
	}
	s.events = append(s.events, e)
}

// StartEvent marks the event Started, with an empty NotBefore, as the
// platform does once the event is approved or NotBefore has passed. It
// reports whether the event exists.
func (s *Server) StartEvent(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked(id)
}

func (s *Server) startLocked(id string) bool {
	for i := range s.events {
		if s.events[i].EventID == id {
			s.events[i].EventStatus = "Started"
			s.events[i].NotBefore = time.Time{}
			s.incarnation++
			return true
		}
	}
	return false
}

// RemoveEvent removes the event (it completed or was canceled) and reports
// whether it existed.
func (s *Server) RemoveEvent(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.events {
		if s.events[i].EventID == id {
			s.events = slices.Delete(s.events, i, i+1)
			s.incarnation++
			return true
		}
	}
	return false
}

// Events returns the scheduled events.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Incarnation returns the current DocumentIncarnation.
func (s *Server) Incarnation() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incarnation
}

// Acks returns the EventIds acknowledged through StartRequests, in order.
func (s *Server) Acks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// RefuseReads makes the service refuse every request from now on (true),
// by closing its connection without an answer, or answer again (false); see
// emulatorkit.Refusal.
func (s *Server) RefuseReads(refuse bool) { s.refusal.Set(refuse) }

// Refused returns how many requests were refused (RefuseReads).
func (s *Server) Refused() int { return s.refusal.Refused() }

// Requests returns how many requests reached path (without the query).
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// ServeHTTP answers like the Azure Instance Metadata Service:
//
//   - without Metadata: true, or with X-Forwarded-For: 400;
//   - without api-version, or with one the service does not know: 400;
//   - GET /metadata/scheduledevents: the document, as JSON;
//   - POST /metadata/scheduledevents {"StartRequests":[{"EventId":...}]}:
//     each named event becomes Started and is recorded as acknowledged; an
//     unknown EventId or a malformed body is 400 and changes nothing;
//   - GET /metadata/instance/compute/name?format=text: the VM's name (a leaf:
//     format=text is required); GET /metadata/instance: a small JSON
//     document with compute.name.
//
// The control API (no header): POST /_emulator/events (an Event as JSON,
// NotBefore in RFC 3339), POST /_emulator/events/<id>/start, DELETE
// /_emulator/events/<id>, GET /_emulator/acks, POST (DELETE)
// /_emulator/refuse-reads to turn RefuseReads on (off).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/_emulator/"); ok {
		s.control(w, r, rest)
		return
	}
	s.mu.Lock()
	s.requests[r.URL.Path]++
	s.mu.Unlock()
	if s.refusal.Refuse(w) {
		return
	}
	if !strings.EqualFold(r.Header.Get("Metadata"), "true") {
		jsonError(w, http.StatusBadRequest, "Bad request. Required metadata header not specified")
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		jsonError(w, http.StatusBadRequest, "Bad request. X-Forwarded-For header is not allowed")
		return
	}
	versions := InstanceVersions
	if r.URL.Path == ScheduledEventsPath {
		versions = ScheduledEventsVersions
	}
	switch v := r.URL.Query().Get("api-version"); {
	case v == "":
		jsonError(w, http.StatusBadRequest, "Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds")
		return
	case !slices.Contains(versions, v):
		jsonError(w, http.StatusBadRequest, "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds")
		return
	}
	switch {
	case r.URL.Path == ScheduledEventsPath && r.Method == http.MethodGet:
		s.document(w)
	case r.URL.Path == ScheduledEventsPath && r.Method == http.MethodPost:
		s.startRequests(w, r)
	case r.URL.Path == VMNamePath && r.Method == http.MethodGet:
		if r.URL.Query().Get("format") != "text" {
			jsonError(w, http.StatusBadRequest, "Bad request. Query parameter format must be text for leaf nodes")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, s.vmName)
	case r.URL.Path == InstancePath && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"compute": map[string]any{"name": s.vmName}})
	case r.URL.Path == ScheduledEventsPath || r.URL.Path == VMNamePath || r.URL.Path == InstancePath:
		jsonError(w, http.StatusMethodNotAllowed, "Method not allowed")
	default:
		jsonError(w, http.StatusNotFound, "Not found")
	}
}

// wireEvent is an event as the service writes it.
type wireEvent struct {
	EventID           string   `json:"EventId"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds int      `json:"DurationInSeconds"`
}

func (s *Server) document(w http.ResponseWriter) {
	s.mu.Lock()
	doc := struct {
		DocumentIncarnation int64       `json:"DocumentIncarnation"`
		Events              []wireEvent `json:"Events"`
	}{DocumentIncarnation: s.incarnation, Events: make([]wireEvent, 0, len(s.events))}
	for _, e := range s.events {
		nb := ""
		if !e.NotBefore.IsZero() {
			nb = e.NotBefore.UTC().Format(TimeLayout)
		}
		resources := e.Resources
		if resources == nil {
			resources = []string{}
		}
		doc.Events = append(doc.Events, wireEvent{
			EventID: e.EventID, EventType: e.EventType, ResourceType: e.ResourceType, Resources: resources,
			EventStatus: e.EventStatus, NotBefore: nb, Description: e.Description, EventSource: e.EventSource,
			DurationInSeconds: e.DurationInSeconds,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) startRequests(w http.ResponseWriter, r *http.Request) {
	var body struct {
		StartRequests []struct {
			EventID string `json:"EventId"`
		} `json:"StartRequests"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || len(body.StartRequests) == 0 {
		jsonError(w, http.StatusBadRequest, "Bad request. The request body must be {\"StartRequests\":[{\"EventId\":\"...\"}]}")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sr := range body.StartRequests {
		if !slices.ContainsFunc(s.events, func(e Event) bool { return e.EventID == sr.EventID }) {
			jsonError(w, http.StatusBadRequest, "Bad request. Unknown EventId "+sr.EventID)
			return
		}
	}
	for _, sr := range body.StartRequests {
		s.startLocked(sr.EventID)
		s.acks = append(s.acks, sr.EventID)
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) control(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.Split(rest, "/")
	switch {
	case r.Method == http.MethodPost && rest == "events":
		var e Event
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&e); err != nil || e.EventID == "" || e.EventType == "" {
			jsonError(w, http.StatusBadRequest, "want an Event with EventId and EventType")
			return
		}
		s.AddEvent(e)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "events" && parts[2] == "start":
		if !s.StartEvent(parts[1]) {
			jsonError(w, http.StatusNotFound, "no event "+parts[1])
			return
		}
	case r.Method == http.MethodDelete && len(parts) == 2 && parts[0] == "events":
		if !s.RemoveEvent(parts[1]) {
			jsonError(w, http.StatusNotFound, "no event "+parts[1])
			return
		}
	case rest == "refuse-reads" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		s.RefuseReads(r.Method == http.MethodPost)
	case r.Method == http.MethodGet && rest == "acks":
		writeJSON(w, http.StatusOK, append([]string{}, s.Acks()...))
		return
	default:
		jsonError(w, http.StatusNotFound, "unknown control "+r.Method+" "+rest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
