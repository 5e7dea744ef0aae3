// Package awsapi emulates, in process and on the wire, the parts of the EC2
// and EC2 Auto Scaling Query APIs that a node-group provider calls, so that
// the provider can be tested through the official AWS SDK pointed at an
// httptest server (BaseEndpoint).
//
// Emulated, with the request parameters the SDK sends and the XML it parses
// (including the error envelopes: <Response><Errors><Error> with RequestID for
// EC2, <ErrorResponse><Error> with RequestId for Auto Scaling):
//
//   - EC2 (Version 2016-11-15): DescribeInstances (instance IDs, filters,
//     MaxResults/NextToken), TerminateInstances, DescribeSpotPriceHistory,
//     DescribeLaunchTemplateVersions, DescribeInstanceTypes.
//   - Auto Scaling (Version 2011-01-01): DescribeAutoScalingGroups (names,
//     tag filters), SetDesiredCapacity, TerminateInstanceInAutoScalingGroup,
//     DescribeScalingActivities, DescribeAutoScalingInstances,
//     PutLifecycleHook, DescribeLifecycleHooks, CompleteLifecycleAction,
//     RecordLifecycleActionHeartbeat (terminating hooks; see events.go).
//   - SQS (JSON 1.0 protocol, routed by X-Amz-Target; see sqs.go), and the
//     events EventBridge rules put on a queue when an instance is
//     interrupted, recommended for rebalance, scheduled for retirement,
//     changes state or is held by a lifecycle hook (RouteEventsTo).
//
// State (groups, launch templates, instances, spot prices, instance types) is
// set up and read through Go methods. Step is the Auto Scaling service's
// reconcile loop: it launches instances up to the desired capacity, removes
// those above it, and moves instances through their lifecycle on the
// injected clock. Faults can be injected: throttling, capacity shortages,
// slow launches and arbitrary errors for the next call of an action.
//
// SDK clients pointed at the emulator should use HTTPClient as their HTTP
// client (see there why).
//
// Not emulated: request signatures (any or none is accepted), any action not
// listed above, launch configurations, warm pools, launching lifecycle hooks, weighted
// capacity, instance refresh, health checks other than EC2 state, subnets and
// networking beyond a private IP and DNS name, and the fine points of the
// Auto Scaling termination policies (see Step).
package awsapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// API names one of the two emulated services.
type API string

// The emulated APIs.
const (
	EC2         API = "ec2"
	AutoScaling API = "autoscaling"
)

// Versions of the Query APIs; a request is routed by its Action.
const (
	EC2Version         = "2016-11-15"
	AutoScalingVersion = "2011-01-01"
)

// Options configure a Server.
type Options struct {
	// Clock stamps launches and activities and times launch delays; nil
	// means the real clock.
	Clock clock.WithTicker
	// Region is used in ARNs and DNS names; default us-east-1.
	Region string
	// AccountID is used in ARNs and owner IDs; default 123456789012.
	AccountID string
	// LaunchDelay is how long a launched instance stays pending before it
	// is running (and InService in its group). SetLaunchDelay changes it.
	LaunchDelay time.Duration
	// TerminateDelay is how long a terminated instance stays shutting-down.
	TerminateDelay time.Duration
	// TerminatedRetention is how long a terminated instance stays visible
	// to DescribeInstances; default one hour, as on EC2.
	TerminatedRetention time.Duration
	// Seed seeds the draw of SetThrottleFraction, so that runs repeat.
	Seed uint64
	// InstanceTypes is the instance-type catalog; nil means
	// DefaultInstanceTypes().
	InstanceTypes []InstanceTypeInfo
}

// APIError is an error the emulator answers with: the HTTP status, the code
// and the message, as AWS would send them.
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *APIError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Server is the emulated EC2 and Auto Scaling endpoint; an http.Handler that
// serves both APIs on one URL. It is safe for concurrent use. Its call
// counters (Calls, AllCalls, Throttled, ResetCalls) count by action, e.g.
// "DescribeInstances".
type Server struct {
	emulatorkit.Counter

	clock     clock.WithTicker
	region    string
	accountID string

	mu                  sync.Mutex
	launchDelay         time.Duration
	terminateDelay      time.Duration
	terminatedRetention time.Duration
	describeLag         time.Duration
	rand                *rand.Rand
	seq                 uint64 // source of IDs

	groups        map[string]*group
	templates     map[string]*launchTemplate // by ID
	instances     map[string]*instance
	instanceOrder []string // IDs in launch order
	instanceTypes map[string]InstanceTypeInfo
	images        map[string]string // architecture by image ID
	spotPrices    []SpotPrice
	activities    []*activity          // oldest first
	open          map[string]*activity // unfinished, by instance ID

	faults    emulatorkit.Faults[APIError] // throttles by API
	shortage  map[string]bool              // group names
	poolShort map[pool]bool
	poolLeft  map[pool]int // launches a pool has left; absent: no limit

	onLaunch    []func(Instance)
	onTerminate []func(Instance)

	queues      map[string]*sqsQueue // by name
	sqsWake     chan struct{}        // closed when a message may be ready
	eventsQueue string               // where EventBridge delivers; "" none
}

// pool is a capacity pool: an instance type in a zone, spot or on-demand.
type pool struct {
	instanceType, zone string
	spot               bool
}

// New returns an emulator with no group, template or instance.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.AccountID == "" {
		opts.AccountID = "123456789012"
	}
	if opts.TerminatedRetention == 0 {
		opts.TerminatedRetention = time.Hour
	}
	if opts.InstanceTypes == nil {
		opts.InstanceTypes = DefaultInstanceTypes()
	}
	s := &Server{
		clock:               opts.Clock,
		region:              opts.Region,
		accountID:           opts.AccountID,
		launchDelay:         opts.LaunchDelay,
		terminateDelay:      opts.TerminateDelay,
		terminatedRetention: opts.TerminatedRetention,
		rand:                rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		groups:              map[string]*group{},
		templates:           map[string]*launchTemplate{},
		instances:           map[string]*instance{},
		instanceTypes:       map[string]InstanceTypeInfo{},
		images:              map[string]string{},
		open:                map[string]*activity{},
		shortage:            map[string]bool{},
		poolShort:           map[pool]bool{},
		poolLeft:            map[pool]int{},
	}
	for _, t := range opts.InstanceTypes {
		s.instanceTypes[t.Name] = t
	}
	return s
}

// ThrottleNext makes the next n requests to api fail as AWS throttles:
// RequestLimitExceeded with HTTP 503 on EC2, Throttling with HTTP 400 on
// Auto Scaling.
func (s *Server) ThrottleNext(api API, n int) {
	s.faults.ThrottleNext(string(api), n)
}

// SetThrottleFraction throttles each request to api with probability f
// (0 turns it off), drawn from the seeded source of Options.Seed.
func (s *Server) SetThrottleFraction(api API, f float64) {
	s.faults.SetThrottleFraction(string(api), f)
}

// FailNext makes the next request named action fail with err; several calls
// queue several failures.
func (s *Server) FailNext(action string, err APIError) {
	s.faults.FailNext(action, err)
}

// SetCapacityShortage makes every launch of group fail with
// InsufficientInstanceCapacity (short) or lifts that (not short).
func (s *Server) SetCapacityShortage(groupName string, short bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shortage[groupName] = short
}

// SetPoolCapacityShortage makes launches of instanceType in zone fail, for
// spot or on-demand capacity. A group with other pools (zones, override
// instance types) launches there instead, as Auto Scaling does.
func (s *Server) SetPoolCapacityShortage(instanceType, zone string, spot, short bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poolShort[pool{instanceType, zone, spot}] = short
}

// SetPoolCapacityLeft lets n more instances of instanceType launch in zone
// (spot or on-demand), after which the pool is short: a pool that runs dry
// in the middle of a request, so that Auto Scaling launches part of it and
// records a failed activity for the rest (a partial delivery). A negative n
// lifts the limit.
func (s *Server) SetPoolCapacityLeft(instanceType, zone string, spot bool, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		delete(s.poolLeft, pool{instanceType, zone, spot})
		return
	}
	s.poolLeft[pool{instanceType, zone, spot}] = n
}

// SetLaunchDelay sets how long instances launched from now on stay pending.
func (s *Server) SetLaunchDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launchDelay = d
}

// SetDescribeLag makes DescribeInstances blind to instances launched less
// than d ago, as EC2's eventual consistency is right after a launch
// ("Eventual consistency in the Amazon EC2 API", EC2 API Reference): asked
// by ID they answer InvalidInstanceID.NotFound, and filters leave them out.
// 0 (the default) shows every instance at once.
func (s *Server) SetDescribeLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.describeLag = d
}

// OnLaunch registers f, called (without the emulator's lock held) with each
// instance that reaches running, whether launched by a group or added with
// AddInstance in the running state.
func (s *Server) OnLaunch(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLaunch = append(s.onLaunch, f)
}

// OnTerminate registers f, called (without the emulator's lock held) with
// each instance that reaches terminated.
func (s *Server) OnTerminate(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onTerminate = append(s.onTerminate, f)
}

// Run calls Step every interval of the emulator's clock until ctx is done.
func (s *Server) Run(ctx context.Context, interval time.Duration) {
	emulatorkit.Run(ctx, s.clock, interval, func() { s.Step() })
}

// nextID returns a fresh number for IDs; the caller holds s.mu.
func (s *Server) nextID() uint64 {
	s.seq++
	return s.seq
}

// requestID returns a request ID shaped like AWS's (a UUID).
func (s *Server) requestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uuid(s.nextID() ^ 0x9e3779b97f4a7c15)
}

func uuid(n uint64) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(n>>32), uint16(n>>16), uint16(n)&0xfff, uint16(n>>20)&0xfff, n&0xffffffffffff)
}

// ServeHTTP answers an EC2 or Auto Scaling Query request (POST with a
// form-encoded body, or GET with the same query string).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.Header.Get("X-Amz-Target"), sqsTargetPrefix) {
		s.serveSQS(w, r)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
	if err := r.ParseForm(); err != nil {
		writeEC2Error(w, s.requestID(), &APIError{http.StatusBadRequest, "MalformedQueryString", err.Error()})
		return
	}
	q := query(r.Form)
	action := q.get("Action")
	ec2Handler, isEC2 := ec2Actions[action]
	asHandler, isAS := autoScalingActions[action]
	api := EC2
	if isAS || (!isEC2 && q.get("Version") == AutoScalingVersion) {
		api = AutoScaling
	}
	reqID := s.requestID()
	fail := func(err *APIError) {
		if api == AutoScaling {
			writeAutoScalingError(w, reqID, err)
		} else {
			writeEC2Error(w, reqID, err)
		}
	}
	if !isEC2 && !isAS {
		if action == "" {
			fail(&APIError{http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action"})
		} else {
			fail(&APIError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)})
		}
		return
	}
	if err := s.admit(api, action); err != nil {
		fail(err)
		return
	}
	var body any
	var err *APIError
	if isEC2 {
		body, err = ec2Handler(s, q)
	} else {
		body, err = asHandler(s, q)
	}
	if err != nil {
		fail(err)
		return
	}
	if isEC2 {
		writeEC2(w, action, reqID, body)
	} else {
		writeAutoScaling(w, action, reqID, body)
	}
}

// admit counts the call and applies injected faults.
func (s *Server) admit(api API, action string) *APIError {
	s.mu.Lock() // for s.rand
	defer s.mu.Unlock()
	throttled, err, failed := s.faults.Admit(&s.Counter, string(api), action, s.rand.Float64)
	switch {
	case throttled && api == EC2:
		return &APIError{http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded."}
	case throttled:
		return &APIError{http.StatusBadRequest, "Throttling", "Rate exceeded"}
	case failed:
		if err.Status == 0 {
			err.Status = http.StatusBadRequest
		}
		return &err
	}
	return nil
}
