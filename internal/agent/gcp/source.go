// Package gcp watches the Compute Engine metadata server for interruption
// notices: instance/preempted (spot and preemptible VMs) and
// instance/maintenance-event (host maintenance), both long-polled with
// wait_for_change.
//
// Wire format: Compute Engine documentation, "About VM metadata" (the
// Metadata-Flavor header, wait_for_change, last_etag, timeout_sec), "Detect if
// a VM was preempted" and "Query metadata server for maintenance event
// notices".
package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/notice"
)

// Metadata paths the source reads, relative to the endpoint.
const (
	PreemptedPath        = "/computeMetadata/v1/instance/preempted"
	MaintenanceEventPath = "/computeMetadata/v1/instance/maintenance-event"
)

// FlavorHeader must be sent with every request, and the metadata server sends
// it back with every answer, with the value FlavorGoogle.
const (
	FlavorHeader = "Metadata-Flavor"
	FlavorGoogle = "Google"
)

// Notice IDs.
const (
	PreemptedID        = "gcp/preempted"
	MaintenanceEventID = "gcp/maintenance-event"
)

// Notice windows, counted from when the source sees the change: a preempted
// VM is stopped 30 seconds after the notice ("Preemption process"), and
// maintenance-event changes 60 seconds before the maintenance starts.
const (
	PreemptionNotice  = 30 * time.Second
	MaintenanceNotice = 60 * time.Second
)

// DefaultLongPollTimeout is the timeout_sec of each long-poll by default.
const DefaultLongPollTimeout = 60 * time.Second

// ErrNotMetadataServer is wrapped in the error of a read whose answer lacks
// Metadata-Flavor: Google: it does not come from the GCP metadata server (a
// proxy, a captive portal, a server restarting). Watch logs it and tries again
// with backoff, as after any failed read: exiting would make a DaemonSet
// restart the agent over and over, through the notice it is there for.
var ErrNotMetadataServer = errors.New("the answer lacks the header Metadata-Flavor: Google: not the GCP metadata server")

// Config configures a Source.
type Config struct {
	// Endpoint is the base URL of the metadata server; empty means
	// http://169.254.169.254 (metadata.google.internal).
	Endpoint string
	// PollInterval is the least time between the starts of two long polls of
	// one key (and between reads when the server sends no ETag), and the
	// first wait after an error, which doubles up to MaxBackoff. Default 1s.
	PollInterval time.Duration
	// RequestTimeout bounds a request that does not wait for a change; a
	// long-poll may take LongPollTimeout longer. Default 2s.
	RequestTimeout time.Duration
	// LongPollTimeout is the timeout_sec of each long-poll, in whole seconds.
	// Default 60s.
	LongPollTimeout time.Duration
	// MaxBackoff caps the wait between reconnections after errors. Default 10s.
	MaxBackoff time.Duration
	// HTTPClient sends the requests; nil means notice.NewHTTPClient().
	HTTPClient *http.Client
	// Clock dates the notices and paces the backoff; nil means the real clock.
	Clock clock.Clock
	// Observer, when not nil, learns the outcome of every read of a key: a
	// long poll that times out with the value unchanged is a good read.
	Observer notice.ReadObserver
}

// Source watches the GCP metadata server. It implements notice.Source.
type Source struct {
	cfg      Config
	endpoint string
}

var _ notice.Source = (*Source)(nil)

// New checks cfg, fills in its defaults and returns a Source.
func New(cfg Config) (*Source, error) {
	endpoint, err := watch.Complete(cfg.Endpoint, &cfg.PollInterval, &cfg.RequestTimeout, &cfg.MaxBackoff, &cfg.HTTPClient, &cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("gcp metadata source: %w", err)
	}
	switch {
	case cfg.LongPollTimeout == 0:
		cfg.LongPollTimeout = DefaultLongPollTimeout
	case cfg.LongPollTimeout < time.Second || cfg.LongPollTimeout%time.Second != 0:
		return nil, fmt.Errorf("gcp metadata source: LongPollTimeout %v: want whole seconds, at least 1s", cfg.LongPollTimeout)
	}
	return &Source{cfg: cfg, endpoint: endpoint}, nil
}

// Cloud returns notice.CloudGCP.
func (s *Source) Cloud() string { return notice.CloudGCP }

// Watch long-polls instance/preempted and instance/maintenance-event
// concurrently until ctx ends; see notice.Source. Each key is read once, then
// waited on with wait_for_change=true and the last ETag, so a change is seen
// as soon as the server has it. A key's long polls start at least
// PollInterval apart: a server that answers them at once (with an unchanged
// ETag, say) is asked at most once per PollInterval, and a change that comes
// in the pause is still seen, at once, by the next long poll, since the ETag
// it names is stale by then. Errors, answers without Metadata-Flavor: Google
// among them (ErrNotMetadataServer), are logged and the key is read again
// after an exponential backoff, without waiting for a change. Watch returns
// nil when ctx ends.
//
// Notices: preempted TRUE is a termination with a deadline PreemptionNotice
// after it was seen; a maintenance-event other than NONE is maintenance with
// a deadline MaintenanceNotice after it was seen, and Ended when the value is
// NONE again.
func (s *Source) Watch(ctx context.Context, out chan<- notice.Notice) error {
	var wg sync.WaitGroup
	for _, k := range s.keys() {
		wg.Go(func() { s.watchKey(ctx, k, out) })
	}
	wg.Wait()
	return nil
}

// Paths returns the two keys as notice paths.
func (s *Source) Paths() notice.Paths {
	return notice.Paths{Notices: []string{PreemptedPath, MaintenanceEventPath}}
}

// Probe reads each key once, without waiting for a change; see
// notice.Source.
func (s *Source) Probe(ctx context.Context) error {
	var errs []error
	for _, k := range s.keys() {
		_, _, _, err := s.poll(ctx, k, &watch.Tracker{}, "")
		errs = append(errs, watch.Reading(s.endpoint+k.path, err))
	}
	return errors.Join(errs...)
}

// keys returns the keys the source reads.
func (s *Source) keys() []key {
	return []key{
		{path: PreemptedPath, id: PreemptedID, notice: s.preempted},
		{path: MaintenanceEventPath, id: MaintenanceEventID, notice: s.maintenance},
	}
}

// key is one metadata key and the notice its value means (ok false: none),
// given the last notice sent for it and whether that one is still open.
type key struct {
	path   string
	id     string
	notice func(value []byte, last notice.Notice, open bool) (n notice.Notice, ok bool, err error)
}

// watchKey watches one key until ctx ends.
func (s *Source) watchKey(ctx context.Context, k key, out chan<- notice.Notice) {
	log := klog.FromContext(ctx).WithValues("cloud", notice.CloudGCP, "key", k.path)
	var (
		tracker  watch.Tracker
		etag     string
		lastLong time.Time // when the last long poll started; zero before the first
		retries  = watch.NewBackoff(s.cfg.PollInterval, s.cfg.MaxBackoff)
	)
	for {
		if etag != "" {
			// Pace the long polls: a server that answers them at once must
			// not make this loop spin.
			if wait := s.cfg.PollInterval - s.cfg.Clock.Since(lastLong); !lastLong.IsZero() && wait > 0 {
				if !watch.Sleep(ctx, s.cfg.Clock, wait) {
					return
				}
			}
			lastLong = s.cfg.Clock.Now()
		}
		n, ok, newETag, err := s.poll(ctx, k, &tracker, etag)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait := retries.Next()
			log.Error(err, "Reading the GCP metadata server; will retry", "retryIn", wait)
			if !watch.Sleep(ctx, s.cfg.Clock, wait) {
				return
			}
			// Read at once, not a long poll: a server that answers again
			// is known to at once (the agent's readiness), and a change
			// missed meanwhile is seen all the same.
			etag = ""
			continue
		}
		retries.Reset()
		if ok && tracker.Changed(n) && !watch.Send(ctx, out, n) {
			return
		}
		if newETag == "" {
			// Without an ETag there is nothing to wait on: poll instead.
			if !watch.Sleep(ctx, s.cfg.Clock, s.cfg.PollInterval) {
				return
			}
		}
		etag = newETag
	}
}

// poll reads key k once (a long poll when etag is not empty) and returns the
// notice its value means, if any (ok), and the value's ETag. It tells the
// observer how the read went.
func (s *Source) poll(ctx context.Context, k key, tracker *watch.Tracker, etag string) (n notice.Notice, ok bool, newETag string, err error) {
	defer func() { watch.Observe(ctx, s.cfg.Observer, k.path, err) }()
	value, newETag, err := s.read(ctx, k.path, etag)
	if err != nil {
		return notice.Notice{}, false, "", err
	}
	n, ok, err = s.handle(k, tracker, value)
	return n, ok, newETag, err
}

// handle turns a value of key k into the notice it means, if any (ok), given
// what tracker recorded of the key before. It does not record the notice.
func (s *Source) handle(k key, tracker *watch.Tracker, value []byte) (notice.Notice, bool, error) {
	last, seen := tracker.Last(k.id)
	n, ok, err := k.notice(value, last, seen && !last.Ended)
	if err != nil {
		return notice.Notice{}, false, fmt.Errorf("GET %s: %w", k.path, err)
	}
	return n, ok, nil
}

// read GETs path: at once when etag is empty, else waiting for a value whose
// ETag differs from etag (or timeout_sec). It returns the value and its ETag.
func (s *Source) read(ctx context.Context, path, etag string) ([]byte, string, error) {
	u := s.endpoint + path
	timeout := s.cfg.RequestTimeout
	if etag != "" {
		q := url.Values{
			"wait_for_change": {"true"},
			"last_etag":       {etag},
			"timeout_sec":     {strconv.Itoa(int(s.cfg.LongPollTimeout / time.Second))},
		}
		u += "?" + q.Encode()
		timeout += s.cfg.LongPollTimeout
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set(FlavorHeader, FlavorGoogle)
	resp, err := watch.Do(ctx, s.cfg.HTTPClient, req, timeout)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.Header.Get(FlavorHeader) != FlavorGoogle {
		return nil, "", fmt.Errorf("GET %s (HTTP %d): %w", u, resp.Status, ErrNotMetadataServer)
	}
	if resp.Status != http.StatusOK {
		return nil, "", watch.NewStatusError(http.MethodGet, u, resp)
	}
	return resp.Body, resp.Header.Get("ETag"), nil
}

// preempted turns a value of instance/preempted into a notice.
func (s *Source) preempted(value []byte, last notice.Notice, open bool) (notice.Notice, bool, error) {
	preempted, err := ParsePreempted(value)
	if err != nil {
		return notice.Notice{}, false, err
	}
	switch {
	case preempted && open:
		return last, true, nil // unchanged, deadline from the first sighting
	case preempted:
		deadline := s.cfg.Clock.Now().Add(PreemptionNotice)
		return notice.Notice{
			Cloud: notice.CloudGCP, Kind: notice.Termination, ID: PreemptedID, Action: "preempted", Deadline: deadline,
			Detail: "GCE preempted the instance; it stops by " + deadline.Format(time.RFC3339),
		}, true, nil
	case open:
		last.Ended = true
		last.Detail = "GCE preempted is FALSE again"
		return last, true, nil
	default:
		return notice.Notice{}, false, nil
	}
}

// maintenance turns a value of instance/maintenance-event into a notice.
func (s *Source) maintenance(value []byte, last notice.Notice, open bool) (notice.Notice, bool, error) {
	event, err := ParseMaintenanceEvent(value)
	if err != nil {
		return notice.Notice{}, false, err
	}
	switch {
	case event != MaintenanceNone:
		deadline := s.cfg.Clock.Now().Add(MaintenanceNotice)
		if open {
			deadline = last.Deadline
		}
		return notice.Notice{
			Cloud: notice.CloudGCP, Kind: notice.Maintenance, ID: MaintenanceEventID, Action: event, Deadline: deadline,
			Detail: fmt.Sprintf("GCE host maintenance %s starts by %s", event, deadline.Format(time.RFC3339)),
		}, true, nil
	case open:
		last.Ended = true
		last.Detail = fmt.Sprintf("GCE host maintenance %s is over (maintenance-event NONE)", last.Action)
		return last, true, nil
	default:
		return notice.Notice{}, false, nil
	}
}
