// Package aws watches the EC2 instance metadata service (IMDSv2) for
// interruption notices: the spot instance-action, the rebalance
// recommendation, scheduled maintenance events and the Auto Scaling target
// lifecycle state.
//
// Wire format: EC2 User Guide, "Use the Instance Metadata Service to access
// instance metadata" (IMDSv2 session tokens) and "Instance metadata
// categories" (spot/instance-action, events/recommendations/rebalance,
// events/maintenance/scheduled, autoscaling/target-lifecycle-state).
package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/notice"
)

// Metadata paths the source reads, relative to the endpoint.
const (
	TokenPath                = "/latest/api/token"
	InstanceActionPath       = "/latest/meta-data/spot/instance-action"
	RebalancePath            = "/latest/meta-data/events/recommendations/rebalance"
	ScheduledEventsPath      = "/latest/meta-data/events/maintenance/scheduled"
	TargetLifecycleStatePath = "/latest/meta-data/autoscaling/target-lifecycle-state"
)

// IMDSv2 headers.
const (
	// TokenTTLHeader asks for (on PUT) and reports (in the answer) a token's
	// lifetime in seconds, 1 to 21600.
	TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	// TokenHeader carries the session token on every GET.
	TokenHeader = "X-aws-ec2-metadata-token"
)

// DefaultTerminationPollInterval is how often the items that carry a
// termination are read by default: a notice is seen 100 ms after it appears
// on average, for two local requests five times a second (IMDS allows 1,024
// packets a second per network interface: "Instance metadata service
// limits", EC2 User Guide).
const DefaultTerminationPollInterval = 200 * time.Millisecond

// MaxTokenTTL is the longest session token IMDSv2 issues (6 hours).
const MaxTokenTTL = 21600 * time.Second

// Notice IDs of the items that are not scheduled events (those use their
// EventId).
const (
	InstanceActionID       = "spot/instance-action"
	RebalanceID            = "rebalance"
	TargetLifecycleStateID = "autoscaling/target-lifecycle-state"
)

// TargetLifecycleGrace is the deadline given to a target-lifecycle-state of
// Terminated, counted from when the source first sees it. Auto Scaling
// publishes no time: the instance goes once the lifecycle hooks, if any, are
// done. Two minutes matches the spot notice the rest of the agent is built for.
const TargetLifecycleGrace = 2 * time.Minute

// The spot instance-action comes two minutes before the action ("Spot
// Instance interruption notices", EC2 User Guide). A time outside what that
// allows is not trusted as it stands: a time already past means the action is
// due now; a time more than MaxInstanceActionLead ahead (a clock gone wrong,
// a broken proxy) is taken as InstanceActionNotice after the notice was seen,
// since waiting for it would leave the pods to go down with the instance.
const (
	// InstanceActionNotice is the notice EC2 documents for a spot
	// interruption.
	InstanceActionNotice = 2 * time.Minute
	// MaxInstanceActionLead is the furthest ahead an instance-action time is
	// taken as it stands: five times the documented notice, room for any
	// clock skew a node keeps with NTP.
	MaxInstanceActionLead = 10 * time.Minute
)

// Config configures a Source.
type Config struct {
	// Endpoint is the base URL of the metadata service; empty means
	// http://169.254.169.254.
	Endpoint string
	// PollInterval between two reads of the rebalance recommendation and the
	// scheduled events. Default 1s.
	PollInterval time.Duration
	// TerminationPollInterval between two reads of the items that carry a
	// termination (spot/instance-action, autoscaling/target-lifecycle-state).
	// Default DefaultTerminationPollInterval, and never above PollInterval.
	TerminationPollInterval time.Duration
	// RequestTimeout bounds one request. Default 2s.
	RequestTimeout time.Duration
	// MaxBackoff caps the wait between rounds after errors. Default 10s, and
	// never below PollInterval.
	MaxBackoff time.Duration
	// TokenTTL is the lifetime asked for each session token, in whole seconds
	// from 1s to 6h. Default 6h. The source renews a token when four fifths of
	// it have passed, and at once when the service answers 401.
	TokenTTL time.Duration
	// HTTPClient sends the requests; nil means notice.NewHTTPClient().
	HTTPClient *http.Client
	// Clock paces the polls and token renewal; nil means the real clock.
	Clock clock.Clock
	// Observer, when not nil, learns the outcome of every read: each token
	// request (TokenPath) and each read of an item, whose 404 is a good read.
	Observer notice.ReadObserver
}

// Source watches the EC2 instance metadata service. It implements
// notice.Source.
type Source struct {
	cfg      Config
	endpoint string
}

var _ notice.Source = (*Source)(nil)

// New checks cfg, fills in its defaults and returns a Source.
func New(cfg Config) (*Source, error) {
	endpoint, err := watch.Complete(cfg.Endpoint, &cfg.PollInterval, &cfg.RequestTimeout, &cfg.MaxBackoff, &cfg.HTTPClient, &cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("aws metadata source: %w", err)
	}
	if err := watch.TerminationInterval(&cfg.TerminationPollInterval, DefaultTerminationPollInterval, cfg.PollInterval); err != nil {
		return nil, fmt.Errorf("aws metadata source: %w", err)
	}
	switch {
	case cfg.TokenTTL == 0:
		cfg.TokenTTL = MaxTokenTTL
	case cfg.TokenTTL < time.Second || cfg.TokenTTL > MaxTokenTTL || cfg.TokenTTL%time.Second != 0:
		return nil, fmt.Errorf("aws metadata source: TokenTTL %v: want whole seconds from 1s to 6h", cfg.TokenTTL)
	}
	return &Source{cfg: cfg, endpoint: endpoint}, nil
}

// Cloud returns notice.CloudAWS.
func (s *Source) Cloud() string { return notice.CloudAWS }

// Paths returns the four items as notice paths and TokenPath as the other.
func (s *Source) Paths() notice.Paths {
	p := notice.Paths{Others: []string{TokenPath}}
	for _, it := range items {
		p.Notices = append(p.Notices, it.path)
	}
	return p
}

// Probe gets a session token and reads each item once; see notice.Source. A
// token refused ends the probe: no item can be read without one.
func (s *Source) Probe(ctx context.Context) error {
	w := &watcher{Source: s, groups: map[string]map[string]bool{}}
	if err := w.ensureToken(ctx); err != nil {
		return watch.Reading(s.endpoint+TokenPath, err)
	}
	var errs []error
	for _, it := range items {
		_, err := w.read(ctx, it)
		errs = append(errs, watch.Reading(s.endpoint+it.path, err))
	}
	return errors.Join(errs...)
}

// Watch reads the two items that carry a termination every
// TerminationPollInterval and the other two every PollInterval until ctx
// ends; see notice.Source. Every error is transient: it is logged, and the
// next round comes after an exponential backoff.
//
// Deadlines: the instance-action's time (now when it is past, and
// InstanceActionNotice after it was seen when it is more than
// MaxInstanceActionLead ahead; both logged); a scheduled event's NotBefore; for
// target-lifecycle-state Terminated, TargetLifecycleGrace after it was first
// seen; none for a rebalance recommendation. An item that disappears after it
// was sent is sent again with Ended set, as is a scheduled event that becomes
// canceled or completed.
func (s *Source) Watch(ctx context.Context, out chan<- notice.Notice) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("cloud", notice.CloudAWS))
	w := &watcher{Source: s, groups: map[string]map[string]bool{}}
	return watch.Poll(ctx, s.cfg.Clock, s.cfg.TerminationPollInterval, s.cfg.MaxBackoff, out, "the EC2 instance metadata", w.poll)
}

// watcher is the state of one Watch.
type watcher struct {
	*Source
	token        string
	tokenRenewAt time.Time
	tracker      watch.Tracker
	// groups maps an item (path) to the IDs of the notices it produced that
	// have not ended, to tell which notices disappeared.
	groups map[string]map[string]bool
	// actionTime is the time of the instance-action last read, and
	// actionDeadline and actionNote the deadline made of it and why (see
	// InstanceActionNotice).
	actionTime, actionDeadline time.Time
	actionNote                 string
	// advisoryDue is when the items that carry no termination are to be read
	// next.
	advisoryDue time.Time
}

// item reads one path and turns its answer into the notices present now.
type item struct {
	path  string
	parse func(w *watcher, ctx context.Context, body []byte) ([]notice.Notice, error)
	// termination: the item carries a termination notice, and is read every
	// TerminationPollInterval rather than every PollInterval.
	termination bool
}

var items = []item{
	{InstanceActionPath, (*watcher).instanceAction, true},
	{RebalancePath, (*watcher).rebalance, false},
	{ScheduledEventsPath, (*watcher).scheduledEvents, false},
	{TargetLifecycleStatePath, (*watcher).targetLifecycleState, true},
}

// poll reads the items that carry a termination, and the others when
// PollInterval has passed since they were last read, and returns the
// notices that are new or changed, and the errors met. An item that fails
// keeps its notices as they were.
func (w *watcher) poll(ctx context.Context) ([]notice.Notice, error) {
	if err := w.ensureToken(ctx); err != nil {
		return nil, err
	}
	var (
		changed []notice.Notice
		errs    []error
	)
	now := w.cfg.Clock.Now()
	advisory := !now.Before(w.advisoryDue)
	if advisory {
		w.advisoryDue = now.Add(w.cfg.PollInterval)
	}
	for _, it := range items {
		if !it.termination && !advisory {
			continue
		}
		ns, err := w.read(ctx, it)
		changed = append(changed, ns...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changed, errors.Join(errs...)
}

// read reads one item and returns the notices to send (see handle), and
// tells the observer how the read went.
func (w *watcher) read(ctx context.Context, it item) ([]notice.Notice, error) {
	resp, err := w.get(ctx, it.path)
	var ns []notice.Notice
	if err == nil {
		ns, err = w.handle(ctx, it, resp)
	}
	watch.Observe(ctx, w.cfg.Observer, it.path, err)
	return ns, err
}

// handle takes in the answer to an item's GET and returns the notices to
// send: new or changed, and ended. An answer that cannot be read changes
// nothing.
func (w *watcher) handle(ctx context.Context, it item, resp *watch.Response) ([]notice.Notice, error) {
	present, err := w.answer(ctx, it, resp)
	if err != nil {
		return nil, err
	}
	return w.update(it.path, present), nil
}

// answer turns the answer to an item's GET into the notices present now; a
// 404 means the item is absent.
func (w *watcher) answer(ctx context.Context, it item, resp *watch.Response) ([]notice.Notice, error) {
	switch resp.Status {
	case http.StatusNotFound:
		return nil, nil
	case http.StatusOK:
		ns, err := it.parse(w, ctx, resp.Body)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", it.path, err)
		}
		return ns, nil
	default:
		return nil, watch.NewStatusError(http.MethodGet, w.endpoint+it.path, resp)
	}
}

// update records the notices present at path and returns those to send:
// new or changed ones, and the ones that disappeared, now Ended.
func (w *watcher) update(path string, present []notice.Notice) []notice.Notice {
	var send []notice.Notice
	seen := map[string]bool{}
	for _, n := range present {
		seen[n.ID] = true
		if w.tracker.Changed(n) {
			send = append(send, n)
		}
	}
	for id := range w.groups[path] {
		if seen[id] {
			continue
		}
		if last, ok := w.tracker.Last(id); ok && !last.Ended {
			last.Ended = true
			last.Detail += " (no longer in the instance metadata)"
			w.tracker.Changed(last)
			send = append(send, last)
		}
	}
	open := map[string]bool{}
	for _, n := range present {
		if !n.Ended {
			open[n.ID] = true
		}
	}
	w.groups[path] = open
	return send
}

func (w *watcher) instanceAction(ctx context.Context, body []byte) ([]notice.Notice, error) {
	a, err := ParseInstanceAction(body)
	if err != nil {
		return nil, err
	}
	detail := fmt.Sprintf("EC2 spot instance-action: %s at %s", a.Action, a.Time.Format(time.RFC3339))
	deadline, note := w.actionDeadlineOf(ctx, a)
	if note != "" {
		detail += "; " + note
	}
	return []notice.Notice{{
		Cloud:    notice.CloudAWS,
		Kind:     notice.Termination,
		ID:       InstanceActionID,
		Action:   a.Action,
		Deadline: deadline,
		Detail:   detail,
	}}, nil
}

// actionDeadlineOf returns the deadline of instance-action a: its time, unless
// that is past (now) or more than MaxInstanceActionLead ahead
// (InstanceActionNotice from now); note says why, then. The deadline of a time
// already read is kept, so that it does not move from poll to poll; an odd
// time is logged when first read.
func (w *watcher) actionDeadlineOf(ctx context.Context, a InstanceAction) (deadline time.Time, note string) {
	if last, seen := w.tracker.Last(InstanceActionID); seen && !last.Ended && a.Time.Equal(w.actionTime) {
		return w.actionDeadline, w.actionNote
	}
	now := w.cfg.Clock.Now()
	switch {
	case a.Time.Before(now):
		deadline, note = now, "that time is in the past, so the action is due now"
	case a.Time.Sub(now) > MaxInstanceActionLead:
		deadline = now.Add(InstanceActionNotice)
		note = fmt.Sprintf("that time is too far ahead (more than %v; EC2 gives %v of notice), so the action is due %v after the notice was seen",
			MaxInstanceActionLead, InstanceActionNotice, InstanceActionNotice)
	default:
		deadline = a.Time
	}
	if note != "" {
		klog.FromContext(ctx).Info("Spot instance-action time out of range; "+note, "action", a.Action, "time", a.Time, "deadline", deadline)
	}
	w.actionTime, w.actionDeadline, w.actionNote = a.Time, deadline, note
	return deadline, note
}

func (w *watcher) rebalance(_ context.Context, body []byte) ([]notice.Notice, error) {
	r, err := ParseRebalanceRecommendation(body)
	if err != nil {
		return nil, err
	}
	return []notice.Notice{{
		Cloud:  notice.CloudAWS,
		Kind:   notice.Rebalance,
		ID:     RebalanceID,
		Action: "rebalance",
		Detail: fmt.Sprintf("EC2 rebalance recommendation issued at %s", r.NoticeTime.Format(time.RFC3339)),
	}}, nil
}

func (w *watcher) scheduledEvents(ctx context.Context, body []byte) ([]notice.Notice, error) {
	events, problems, err := ParseScheduledEvents(body)
	if err != nil {
		return nil, err
	}
	log := klog.FromContext(ctx)
	ns := make([]notice.Notice, 0, len(events))
	partial := map[string]bool{}
	for _, p := range problems {
		kv := []any{"index", p.Index}
		if p.EventID != "" {
			kv = append(kv, "eventID", p.EventID)
		}
		if !p.Skipped {
			partial[p.EventID] = true
			log.Error(p.Err, "Scheduled event has malformed fields; they are ignored", kv...)
			continue
		}
		log.Error(p.Err, "Skipping a malformed scheduled event", kv...)
	}
	// The other items' notice IDs are taken: an event named like one would
	// make the two notices flip at every poll. (Real EventIds read
	// instance-event-<hex>.)
	seen := map[string]bool{InstanceActionID: true, RebalanceID: true, TargetLifecycleStateID: true}
	for _, e := range events {
		if seen[e.EventID] {
			// Two entries for one event would make the notice flip between
			// them at every poll: the first stands.
			log.Error(nil, "Skipping a scheduled event whose EventId is taken", "eventID", e.EventID)
			continue
		}
		seen[e.EventID] = true
		if last, ok := w.tracker.Last(e.EventID); partial[e.EventID] && ok && !last.Ended && !e.Ended() {
			// What was read of the event before stands.
			ns = append(ns, last)
			continue
		}
		state := e.State
		if state == "" {
			state = "unknown state"
		}
		detail := fmt.Sprintf("EC2 scheduled event %s %s (%s)", e.EventID, e.Code, state)
		if !e.NotBefore.IsZero() {
			detail += " from " + e.NotBefore.Format(time.RFC3339)
		}
		if !e.NotAfter.IsZero() {
			detail += " to " + e.NotAfter.Format(time.RFC3339)
		}
		if e.Description != "" {
			detail += ": " + e.Description
		}
		ns = append(ns, notice.Notice{
			Cloud:    notice.CloudAWS,
			Kind:     notice.Maintenance,
			ID:       e.EventID,
			Action:   e.Code,
			Deadline: e.NotBefore,
			Ended:    e.Ended(),
			Detail:   detail,
		})
	}
	for _, p := range problems {
		// An event seen before has not ended for being unreadable now.
		if last, ok := w.tracker.Last(p.EventID); p.Skipped && p.EventID != "" && !seen[p.EventID] && ok && !last.Ended {
			seen[p.EventID] = true
			ns = append(ns, last)
		}
	}
	return ns, nil
}

func (w *watcher) targetLifecycleState(_ context.Context, body []byte) ([]notice.Notice, error) {
	state, err := ParseTargetLifecycleState(body)
	if err != nil {
		return nil, err
	}
	if state != TargetLifecycleStateTerminated {
		return nil, nil
	}
	deadline := w.cfg.Clock.Now().Add(TargetLifecycleGrace)
	if last, ok := w.tracker.Last(TargetLifecycleStateID); ok && !last.Ended {
		deadline = last.Deadline // counted from the first sighting
	}
	return []notice.Notice{{
		Cloud:    notice.CloudAWS,
		Kind:     notice.Termination,
		ID:       TargetLifecycleStateID,
		Action:   state,
		Deadline: deadline,
		Detail:   "EC2 Auto Scaling target lifecycle state: " + state,
	}}, nil
}

// ensureToken gets a session token when there is none or the current one is
// due for renewal.
func (w *watcher) ensureToken(ctx context.Context) error {
	now := w.cfg.Clock.Now()
	if w.token != "" && now.Before(w.tokenRenewAt) {
		return nil
	}
	err := w.newToken(ctx, now)
	watch.Observe(ctx, w.cfg.Observer, TokenPath, err)
	return err
}

// newToken asks for a session token at now.
func (w *watcher) newToken(ctx context.Context, now time.Time) error {
	req, err := http.NewRequest(http.MethodPut, w.endpoint+TokenPath, nil)
	if err != nil {
		return err
	}
	req.Header.Set(TokenTTLHeader, strconv.Itoa(int(w.cfg.TokenTTL/time.Second)))
	resp, err := watch.Do(ctx, w.cfg.HTTPClient, req, w.cfg.RequestTimeout)
	if err != nil {
		return fmt.Errorf("getting an IMDSv2 session token: %w", err)
	}
	if resp.Status != http.StatusOK {
		return fmt.Errorf("getting an IMDSv2 session token: %w", watch.NewStatusError(req.Method, req.URL.String(), resp))
	}
	token := strings.TrimSpace(string(resp.Body))
	if token == "" {
		return errors.New("getting an IMDSv2 session token: empty answer")
	}
	ttl := w.cfg.TokenTTL
	if granted, err := strconv.Atoi(resp.Header.Get(TokenTTLHeader)); err == nil && granted > 0 {
		ttl = min(ttl, time.Duration(granted)*time.Second)
	}
	w.token = token
	w.tokenRenewAt = now.Add(ttl * 4 / 5)
	return nil
}

// get reads path with the session token; on a 401 (token expired or
// revoked) it gets a new token and tries once more.
func (w *watcher) get(ctx context.Context, path string) (*watch.Response, error) {
	resp, err := w.getOnce(ctx, path)
	if err != nil || resp.Status != http.StatusUnauthorized {
		return resp, err
	}
	w.token = ""
	if err := w.ensureToken(ctx); err != nil {
		return nil, err
	}
	return w.getOnce(ctx, path)
}

func (w *watcher) getOnce(ctx context.Context, path string) (*watch.Response, error) {
	req, err := http.NewRequest(http.MethodGet, w.endpoint+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(TokenHeader, w.token)
	resp, err := watch.Do(ctx, w.cfg.HTTPClient, req, w.cfg.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp, nil
}
