// Package awsimds emulates the parts of the EC2 instance metadata service
// (IMDSv2, tokens required) that spotter-agent reads: session tokens, the spot
// instance-action, the rebalance recommendation, scheduled maintenance events
// and the Auto Scaling target lifecycle state. It follows the EC2 User Guide's
// wire format strictly, so that a client that works against it speaks the
// real protocol.
//
// Tests inject notices with the Set methods; a separate process can do the
// same through the control API under /_emulator/ (see ServeHTTP).
package awsimds

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// Paths the emulator serves.
const (
	TokenPath                = "/latest/api/token"
	InstanceIDPath           = "/latest/meta-data/instance-id"
	InstanceActionPath       = "/latest/meta-data/spot/instance-action"
	RebalancePath            = "/latest/meta-data/events/recommendations/rebalance"
	ScheduledEventsPath      = "/latest/meta-data/events/maintenance/scheduled"
	TargetLifecycleStatePath = "/latest/meta-data/autoscaling/target-lifecycle-state"
)

// Headers of the IMDSv2 token flow.
const (
	TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	TokenHeader    = "X-aws-ec2-metadata-token"
)

// ScheduledEventTimeLayout is the date layout of scheduled events.
const ScheduledEventTimeLayout = "2 Jan 2006 15:04:05 GMT"

// ScheduledEvent is one entry of events/maintenance/scheduled. Zero times are
// left out of the document.
type ScheduledEvent struct {
	Code              string // instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop
	Description       string
	EventID           string // instance-event-...
	NotBefore         time.Time
	NotAfter          time.Time
	NotBeforeDeadline time.Time
	State             string // active, canceled, completed
}

// Options configure a Server.
type Options struct {
	// Clock decides when tokens expire; nil means the real clock.
	Clock clock.PassiveClock
	// InstanceID is served at meta-data/instance-id; default i-0123456789abcdef0.
	InstanceID string
}

// Server is the emulated metadata service; an http.Handler. It is safe for
// concurrent use.
type Server struct {
	clock      clock.PassiveClock
	instanceID string
	refusal    emulatorkit.Refusal

	mu                   sync.Mutex
	tokens               map[string]time.Time // token -> expiry
	instanceAction       []byte               // nil: 404
	rebalance            []byte               // nil: 404
	scheduled            []byte               // nil: 404
	targetLifecycleState string               // "": 404
	requests             map[string]int       // path -> count
	unauthorized         int
}

// New returns an emulator with no notice.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.InstanceID == "" {
		opts.InstanceID = "i-0123456789abcdef0"
	}
	return &Server{clock: opts.Clock, instanceID: opts.InstanceID, tokens: map[string]time.Time{}, requests: map[string]int{}}
}

// SetInstanceAction publishes a spot instance-action: action (terminate, stop
// or hibernate) at t.
func (s *Server) SetInstanceAction(action string, t time.Time) {
	b, _ := json.Marshal(map[string]string{"action": action, "time": t.UTC().Format("2006-01-02T15:04:05Z")})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instanceAction = b
}

// ClearInstanceAction withdraws the instance-action (404 again).
func (s *Server) ClearInstanceAction() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instanceAction = nil
}

// SetRebalance publishes a rebalance recommendation issued at t.
func (s *Server) SetRebalance(t time.Time) {
	b, _ := json.Marshal(map[string]string{"noticeTime": t.UTC().Format("2006-01-02T15:04:05Z")})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebalance = b
}

// ClearRebalance withdraws the rebalance recommendation (404 again).
func (s *Server) ClearRebalance() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebalance = nil
}

// SetScheduledEvents replaces the scheduled events; with none, the document
// is an empty array.
func (s *Server) SetScheduledEvents(events ...ScheduledEvent) {
	type wire struct {
		Code              string
		Description       string
		EventID           string `json:"EventId"`
		NotAfter          string `json:",omitempty"`
		NotBefore         string `json:",omitempty"`
		NotBeforeDeadline string `json:",omitempty"`
		State             string
	}
	format := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(ScheduledEventTimeLayout)
	}
	doc := make([]wire, 0, len(events))
	for _, e := range events {
		doc = append(doc, wire{
			Code: e.Code, Description: e.Description, EventID: e.EventID, State: e.State,
			NotAfter: format(e.NotAfter), NotBefore: format(e.NotBefore), NotBeforeDeadline: format(e.NotBeforeDeadline),
		})
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled = b
}

// ClearScheduledEvents makes events/maintenance/scheduled answer 404.
func (s *Server) ClearScheduledEvents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled = nil
}

// SetTargetLifecycleState publishes the Auto Scaling target lifecycle state
// (InService, Terminated, ...); "" means not in an Auto Scaling group (404).
func (s *Server) SetTargetLifecycleState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targetLifecycleState = state
}

// ExpireTokens invalidates every session token issued so far: the next GET
// with one of them is answered 401.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// RefuseReads makes the service refuse every request from now on (true),
// the token's among them, by closing its connection without an answer, or
// answer again (false); see emulatorkit.Refusal.
func (s *Server) RefuseReads(refuse bool) { s.refusal.Set(refuse) }

// Refused returns how many requests were refused (RefuseReads).
func (s *Server) Refused() int { return s.refusal.Refused() }

// Requests returns how many requests reached path (any method, any answer).
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// Unauthorized returns how many GETs were refused for want of a valid token.
func (s *Server) Unauthorized() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unauthorized
}

// ServeHTTP answers like IMDSv2 with tokens required:
//
//   - PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-seconds from 1
//     to 21600 (else 400) and no X-Forwarded-For (else 403); it answers a
//     token as text and echoes the TTL header.
//   - GET of a metadata path needs a valid, unexpired X-aws-ec2-metadata-token
//     (else 401); an absent item is 404. Bodies are text/plain, JSON ones too.
//   - Other methods: 405.
//
// The control API (no token): POST /_emulator/instance-action
// {"action","time"}, POST /_emulator/rebalance {"noticeTime"}, POST
// /_emulator/scheduled-events (the scheduled-events document itself), POST
// /_emulator/target-lifecycle-state (the state as text), DELETE of any of
// those to clear it, POST /_emulator/expire-tokens, and POST (DELETE)
// /_emulator/refuse-reads to turn RefuseReads on (off).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_emulator/") {
		s.control(w, r)
		return
	}
	s.mu.Lock()
	s.requests[r.URL.Path]++
	s.mu.Unlock()
	if s.refusal.Refuse(w) {
		return
	}
	switch {
	case r.URL.Path == TokenPath && r.Method == http.MethodPut:
		s.putToken(w, r)
	case r.URL.Path == TokenPath:
		w.Header().Set("Allow", http.MethodPut)
		text(w, http.StatusMethodNotAllowed, "")
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		s.get(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD")
		text(w, http.StatusMethodNotAllowed, "")
	}
}

func (s *Server) putToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Forwarded-For") != "" {
		text(w, http.StatusForbidden, "")
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(TokenTTLHeader))
	if err != nil || ttl < 1 || ttl > 21600 {
		text(w, http.StatusBadRequest, "")
		return
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	token := "AQAEA" + hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[token] = s.clock.Now().Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(TokenTTLHeader, strconv.Itoa(ttl))
	text(w, http.StatusOK, token)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	expiry, ok := s.tokens[r.Header.Get(TokenHeader)]
	if !ok || !s.clock.Now().Before(expiry) {
		s.unauthorized++
		text(w, http.StatusUnauthorized, "")
		return
	}
	var body []byte
	switch r.URL.Path {
	case InstanceIDPath:
		body = []byte(s.instanceID)
	case InstanceActionPath:
		body = s.instanceAction
	case RebalancePath:
		body = s.rebalance
	case ScheduledEventsPath:
		body = s.scheduled
	case TargetLifecycleStatePath:
		if s.targetLifecycleState != "" {
			body = []byte(s.targetLifecycleState)
		}
	}
	if body == nil {
		text(w, http.StatusNotFound, notFoundPage)
		return
	}
	text(w, http.StatusOK, string(body))
}

// notFoundPage is the HTML body IMDS sends with a 404.
const notFoundPage = `<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
	"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>404 - Not Found</title>
 </head>
 <body>
  <h1>404 - Not Found</h1>
 </body>
</html>
`

func text(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// control serves the /_emulator/ API.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/_emulator/")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		text(w, http.StatusBadRequest, err.Error())
		return
	}
	if r.Method == http.MethodDelete {
		switch name {
		case "instance-action":
			s.ClearInstanceAction()
		case "rebalance":
			s.ClearRebalance()
		case "scheduled-events":
			s.ClearScheduledEvents()
		case "target-lifecycle-state":
			s.SetTargetLifecycleState("")
		case "refuse-reads":
			s.RefuseReads(false)
		default:
			text(w, http.StatusNotFound, "unknown control "+name)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, DELETE")
		text(w, http.StatusMethodNotAllowed, "")
		return
	}
	var in struct {
		Action     string    `json:"action"`
		Time       time.Time `json:"time"`
		NoticeTime time.Time `json:"noticeTime"`
	}
	switch name {
	case "instance-action", "rebalance":
		if err := json.Unmarshal(body, &in); err != nil {
			text(w, http.StatusBadRequest, err.Error())
			return
		}
		if name == "rebalance" {
			s.SetRebalance(in.NoticeTime)
		} else {
			s.SetInstanceAction(in.Action, in.Time)
		}
	case "scheduled-events":
		if !json.Valid(body) {
			text(w, http.StatusBadRequest, "not JSON")
			return
		}
		s.mu.Lock()
		s.scheduled = body
		s.mu.Unlock()
	case "target-lifecycle-state":
		s.SetTargetLifecycleState(strings.TrimSpace(string(body)))
	case "expire-tokens":
		s.ExpireTokens()
	case "refuse-reads":
		s.RefuseReads(true)
	default:
		text(w, http.StatusNotFound, "unknown control "+name)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
