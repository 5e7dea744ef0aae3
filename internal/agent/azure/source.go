// Package azure watches Azure Scheduled Events (part of the Azure Instance
// Metadata Service) for the events that affect this VM: Preempt and Terminate
// (the VM goes away) and Reboot, Redeploy and Freeze (maintenance), and
// acknowledges them so that the platform can go ahead early.
//
// Wire format: Azure documentation, "Azure Metadata Service: Scheduled Events
// for Linux VMs" (api-version 2020-07-01) and "Azure Instance Metadata
// Service" (the Metadata: true header, compute/name).
package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/notice"
)

// Requests the source sends, relative to the endpoint.
const (
	// ScheduledEventsPath is read with GET and acknowledged with POST.
	ScheduledEventsPath = "/metadata/scheduledevents?api-version=2020-07-01"
	// VMNamePath gives the VM's name when no provider ID is configured.
	VMNamePath = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
)

// MetadataHeader must be on every request (the service answers 400 without
// it), with the value "true".
const MetadataHeader = "Metadata"

// MinimumNotice is the least time between an event's scheduling and its start,
// per event type, as documented. The source uses it as the deadline, counted
// from when it sees the event, when NotBefore is empty (the event started).
// Terminate's notice is configurable from 5 to 15 minutes: the minimum is used.
var MinimumNotice = map[string]time.Duration{
	EventFreeze:    15 * time.Minute,
	EventReboot:    15 * time.Minute,
	EventRedeploy:  10 * time.Minute,
	EventPreempt:   30 * time.Second,
	EventTerminate: 5 * time.Minute,
}

// DefaultTerminationPollInterval is how often the document is read by
// default: an event is seen 125 ms after it appears on average, so that a
// notice is cordoned within 250 ms, for four of the five requests a second
// the Instance Metadata Service allows a VM ("Azure Instance Metadata
// Service", rate limiting), which leaves one a second for the VM's other
// readers; a refused read (429) backs off.
const DefaultTerminationPollInterval = 250 * time.Millisecond

// unknownTypeNotice is the deadline of an event type not in MinimumNotice:
// the shortest documented notice.
const unknownTypeNotice = 30 * time.Second

// Config configures a Source.
type Config struct {
	// Endpoint is the base URL of the metadata service; empty means
	// http://169.254.169.254.
	Endpoint string
	// PollInterval is the longest time between two reads of the document.
	// Default 1s.
	PollInterval time.Duration
	// TerminationPollInterval between two reads of the document, which carries
	// the termination events: the smaller of it and PollInterval is used.
	// Default DefaultTerminationPollInterval.
	TerminationPollInterval time.Duration
	// RequestTimeout bounds one request. Default 2s.
	RequestTimeout time.Duration
	// MaxBackoff caps the wait between reads after errors. Default 10s, and
	// never below PollInterval.
	MaxBackoff time.Duration
	// ProviderID is the node's spec.providerID; it names this VM in the
	// events' Resources (see ResourceName). Empty: Watch asks the metadata
	// service for the name (compute/name).
	ProviderID string
	// HTTPClient sends the requests; nil means notice.NewHTTPClient().
	HTTPClient *http.Client
	// Clock paces the polls and dates the notices; nil means the real clock.
	Clock clock.Clock
	// Observer, when not nil, learns the outcome of every read of the
	// document and of the VM's name, by their paths without the query (see
	// Paths). Acknowledgements are not reads.
	Observer notice.ReadObserver
}

// Source watches Azure Scheduled Events. It implements notice.Source and
// notice.Acknowledger.
type Source struct {
	cfg      Config
	endpoint string
	vmName   string // from ProviderID; empty until Watch asks the service
}

var (
	_ notice.Source       = (*Source)(nil)
	_ notice.Acknowledger = (*Source)(nil)
)

// New checks cfg, fills in its defaults and returns a Source.
func New(cfg Config) (*Source, error) {
	endpoint, err := watch.Complete(cfg.Endpoint, &cfg.PollInterval, &cfg.RequestTimeout, &cfg.MaxBackoff, &cfg.HTTPClient, &cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("azure scheduled events source: %w", err)
	}
	if err := watch.TerminationInterval(&cfg.TerminationPollInterval, DefaultTerminationPollInterval, cfg.PollInterval); err != nil {
		return nil, fmt.Errorf("azure scheduled events source: %w", err)
	}
	var name string
	if cfg.ProviderID != "" {
		if name, err = ResourceName(cfg.ProviderID); err != nil {
			return nil, fmt.Errorf("azure scheduled events source: %w", err)
		}
	}
	return &Source{cfg: cfg, endpoint: endpoint, vmName: name}, nil
}

// Cloud returns notice.CloudAzure.
func (s *Source) Cloud() string { return notice.CloudAzure }

// Paths returns the Scheduled Events document as the notice path and, when
// no ProviderID names the VM, the VM's name as the other; without their
// queries.
func (s *Source) Paths() notice.Paths {
	p := notice.Paths{Notices: []string{pathOf(ScheduledEventsPath)}}
	if s.vmName == "" {
		p.Others = []string{pathOf(VMNamePath)}
	}
	return p
}

// pathOf returns request without its query.
func pathOf(request string) string {
	path, _, _ := strings.Cut(request, "?")
	return path
}

// Probe reads the VM's name, when no ProviderID gives it, then the document
// once; see notice.Source.
func (s *Source) Probe(ctx context.Context) error {
	vmName := s.vmName
	if vmName == "" {
		name, err := s.readVMName(ctx)
		if err != nil {
			return watch.Reading(s.endpoint+VMNamePath, err)
		}
		vmName = name
	}
	w := &watcher{Source: s, vmName: vmName, incarnation: -1}
	_, err := w.poll(ctx)
	return watch.Reading(s.endpoint+ScheduledEventsPath, err)
}

// Watch reads the Scheduled Events document every TerminationPollInterval
// (or PollInterval, if smaller) until ctx ends; see notice.Source. It processes a document only when its
// DocumentIncarnation differs from the last one processed, and only the
// events whose Resources name this VM. Errors are logged and retried after an
// exponential backoff.
//
// Notices: Preempt and Terminate are terminations, Reboot, Redeploy, Freeze
// (and types not known yet) maintenance; the ID is the EventId and the Action
// the EventType. The deadline is NotBefore or, when empty, the one of an
// earlier sighting, else MinimumNotice after the event is seen. An event that
// disappears from the document is sent again with Ended set.
func (s *Source) Watch(ctx context.Context, out chan<- notice.Notice) error {
	log := klog.FromContext(ctx).WithValues("cloud", notice.CloudAzure)
	backoff := watch.NewBackoff(s.cfg.PollInterval, s.cfg.MaxBackoff)
	vmName := s.vmName
	for vmName == "" {
		name, err := s.readVMName(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			vmName = name
			log.V(1).Info("VM name from the metadata service", "vmName", vmName)
			break
		}
		wait := backoff.Next()
		log.Error(err, "Reading the VM name from the Azure metadata service; will retry", "retryIn", wait)
		if !watch.Sleep(ctx, s.cfg.Clock, wait) {
			return nil
		}
	}
	w := &watcher{Source: s, vmName: vmName, incarnation: -1}
	return watch.Poll(klog.NewContext(ctx, log), s.cfg.Clock, s.cfg.TerminationPollInterval, s.cfg.MaxBackoff, out, "Azure Scheduled Events", w.poll)
}

// Acknowledge approves the event n names (POST StartRequests), so that the
// platform may start it before NotBefore. n must be an Azure notice. It is
// safe to call while Watch runs.
func (s *Source) Acknowledge(ctx context.Context, n notice.Notice) error {
	if n.Cloud != notice.CloudAzure || n.ID == "" {
		return fmt.Errorf("acknowledging %s notice %q: not an Azure scheduled event", n.Cloud, n.ID)
	}
	type startRequest struct {
		EventID string `json:"EventId"`
	}
	body, err := json.Marshal(struct {
		StartRequests []startRequest `json:"StartRequests"`
	}{[]startRequest{{n.ID}}})
	if err != nil {
		return err
	}
	u := s.endpoint + ScheduledEventsPath
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(MetadataHeader, "true")
	req.Header.Set("Content-Type", "application/json")
	resp, err := watch.Do(ctx, s.cfg.HTTPClient, req, s.cfg.RequestTimeout)
	if err != nil {
		return fmt.Errorf("acknowledging Azure event %s: %w", n.ID, err)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return fmt.Errorf("acknowledging Azure event %s: %w", n.ID, watch.NewStatusError(http.MethodPost, u, resp))
	}
	return nil
}

// readVMName reads the VM's name, and tells the observer how the read went.
func (s *Source) readVMName(ctx context.Context) (name string, err error) {
	defer func() { watch.Observe(ctx, s.cfg.Observer, pathOf(VMNamePath), err) }()
	resp, err := s.get(ctx, VMNamePath)
	if err != nil {
		return "", err
	}
	name = strings.TrimSpace(string(resp.Body))
	if name == "" || strings.ContainsAny(name, "/ \t\n{}\"") {
		return "", fmt.Errorf("GET %s: %q is not a VM name", VMNamePath, resp.Body)
	}
	return name, nil
}

// get GETs path with Metadata: true and wants a 200.
func (s *Source) get(ctx context.Context, path string) (*watch.Response, error) {
	u := s.endpoint + path
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(MetadataHeader, "true")
	resp, err := watch.Do(ctx, s.cfg.HTTPClient, req, s.cfg.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.Status != http.StatusOK {
		return nil, watch.NewStatusError(http.MethodGet, u, resp)
	}
	return resp, nil
}

// watcher is the state of one Watch.
type watcher struct {
	*Source
	vmName      string
	incarnation int64 // last processed; -1 before the first
	tracker     watch.Tracker
	// corrected holds, by EventId, the deadline given to a termination event
	// whose NotBefore was out of range, and that NotBefore: the deadline does not
	// move from one document to the next while NotBefore stays the same.
	corrected map[string][2]time.Time
}

// poll reads the document and returns the notices to send. It tells the
// observer how the read went.
func (w *watcher) poll(ctx context.Context) (send []notice.Notice, err error) {
	defer func() { watch.Observe(ctx, w.cfg.Observer, pathOf(ScheduledEventsPath), err) }()
	resp, err := w.get(ctx, ScheduledEventsPath)
	if err != nil {
		return nil, err
	}
	return w.process(ctx, resp.Body)
}

// process handles one Scheduled Events document and returns the notices to
// send. A document that cannot be read at all is an error; its malformed
// events are logged and skipped, and the others handled (see ParseDocument).
func (w *watcher) process(ctx context.Context, body []byte) ([]notice.Notice, error) {
	doc, err := ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", ScheduledEventsPath, err)
	}
	if doc.Incarnation == w.incarnation {
		return nil, nil
	}
	w.incarnation = doc.Incarnation
	log := klog.FromContext(ctx)
	var send []notice.Notice
	present := map[string]bool{}
	for _, p := range doc.Problems {
		if !p.Skipped {
			continue // logged below if the event is this VM's
		}
		kv := []any{"incarnation", doc.Incarnation, "index", p.Index}
		if p.EventID != "" {
			kv = append(kv, "eventID", p.EventID)
			// It may be this VM's event, seen before: it has not ended for
			// being unreadable now.
			present[p.EventID] = true
		}
		log.Error(p.Err, "Skipping a malformed scheduled event", kv...)
	}
	seen := map[string]bool{}
	for _, e := range doc.Events {
		if !e.Affects(w.vmName) {
			continue
		}
		if seen[e.EventID] {
			// Two events with one EventId would make the notice flip
			// between them with every incarnation: the first stands.
			log.Error(nil, "Skipping a second scheduled event with the same EventId", "incarnation", doc.Incarnation, "eventID", e.EventID)
			continue
		}
		seen[e.EventID] = true
		for _, p := range doc.Problems {
			if !p.Skipped && p.EventID == e.EventID {
				log.Error(p.Err, "Scheduled event of this VM has malformed fields; they are ignored",
					"incarnation", doc.Incarnation, "index", p.Index, "eventID", e.EventID)
			}
		}
		present[e.EventID] = true
		if n := w.notice(ctx, e); w.tracker.Changed(n) {
			send = append(send, n)
		}
	}
	for _, id := range w.tracker.Open() {
		if present[id] {
			continue
		}
		n, _ := w.tracker.Last(id)
		n.Ended = true
		n.Detail = fmt.Sprintf("Azure %s event %s is no longer scheduled", n.Action, n.ID)
		w.tracker.Changed(n)
		send = append(send, n)
	}
	return send, nil
}

// MaxTerminationLead is the furthest ahead the NotBefore of a Preempt or
// Terminate event is taken as it stands: the longest notice Azure documents
// for them (a Terminate notice is configurable up to 15 minutes). A NotBefore
// already past means the event is due now; one further ahead (a clock gone
// wrong, a broken proxy) is taken as the type's MinimumNotice after the event
// was seen, since waiting for it would leave the pods to go down with the VM.
// Maintenance events keep their NotBefore: planned maintenance may be
// announced early.
const MaxTerminationLead = 15 * time.Minute

func (w *watcher) notice(ctx context.Context, e Event) notice.Notice {
	kind := notice.Maintenance
	if e.EventType == EventPreempt || e.EventType == EventTerminate {
		kind = notice.Termination
	}
	deadline := e.NotBefore
	if kind == notice.Termination && !deadline.IsZero() {
		deadline = w.terminationDeadline(ctx, e)
	}
	if deadline.IsZero() {
		if last, ok := w.tracker.Last(e.EventID); ok && !last.Ended && !last.Deadline.IsZero() {
			deadline = last.Deadline
		} else {
			d, ok := MinimumNotice[e.EventType]
			if !ok {
				d = unknownTypeNotice
			}
			deadline = w.cfg.Clock.Now().Add(d)
		}
	}
	detail := fmt.Sprintf("Azure %s event %s (%s, source %s) not before %s", e.EventType, e.EventID, e.EventStatus, e.EventSource, deadline.Format(time.RFC3339))
	if e.Description != "" {
		detail += ": " + e.Description
	}
	return notice.Notice{Cloud: notice.CloudAzure, Kind: kind, ID: e.EventID, Action: e.EventType, Deadline: deadline, Detail: detail}
}

// terminationDeadline returns the deadline of a Preempt or Terminate event with
// a NotBefore: NotBefore itself within MaxTerminationLead, else corrected (see
// MaxTerminationLead) and logged when first seen.
func (w *watcher) terminationDeadline(ctx context.Context, e Event) time.Time {
	if c, ok := w.corrected[e.EventID]; ok && c[1].Equal(e.NotBefore) {
		return c[0]
	}
	now := w.cfg.Clock.Now()
	var deadline time.Time
	var why string
	switch {
	case e.NotBefore.Before(now):
		deadline, why = now, "it is in the past, so the event is due now"
	case e.NotBefore.Sub(now) > MaxTerminationLead:
		d, ok := MinimumNotice[e.EventType]
		if !ok {
			d = unknownTypeNotice
		}
		deadline = now.Add(d)
		why = fmt.Sprintf("it is more than %v ahead, the longest notice Azure gives, so the event is due %v after it was seen", MaxTerminationLead, d)
	default:
		return e.NotBefore
	}
	klog.FromContext(ctx).Info("Scheduled event NotBefore out of range; "+why, "eventID", e.EventID, "eventType", e.EventType, "notBefore", e.NotBefore, "deadline", deadline)
	if w.corrected == nil {
		w.corrected = map[string][2]time.Time{}
	}
	if len(w.corrected) > 64 { // events come and go; keep the record small
		clear(w.corrected)
	}
	w.corrected[e.EventID] = [2]time.Time{deadline, e.NotBefore}
	return deadline
}
