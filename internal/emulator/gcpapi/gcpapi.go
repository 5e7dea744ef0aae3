// Package gcpapi emulates, in process and on the wire, the parts of the
// Compute Engine REST API (v1, JSON) that a node-group provider calls, so that
// the provider can be tested through the official Go client
// (cloud.google.com/go/compute/apiv1, REST transport) pointed at an
// httptest server (option.WithEndpoint, option.WithoutAuthentication).
//
// Emulated, with the paths, query parameters and bodies the client sends and
// the JSON it parses (64-bit IDs as strings, enums as names, errors in
// Google's envelope {"error":{"code","message","errors":[{"reason",...}]}}):
//
//   - instances: aggregatedList (maxResults, pageToken), list (one zone),
//     get, delete;
//   - instanceGroupManagers and regionInstanceGroupManagers: aggregatedList
//     (zonal and regional groups), get, resize, deleteInstances,
//     listManagedInstances (currentAction, instanceStatus, lastAttempt
//     errors);
//   - instanceTemplates (global) and regionInstanceTemplates: get (machine
//     type, scheduling, labels, metadata, guestAccelerators);
//   - machineTypes: get (guestCpus, memoryMb, architecture, the built-in
//     accelerators of GPU machine types);
//   - zoneOperations and regionOperations: get. Every write answers with an
//     operation, RUNNING for the operation delay (SetOperationDelay), then
//     DONE, its effect applied when it is done.
//
// At the same address, the Cloud Billing Catalog's list of Compute Engine
// SKUs, which prices machine types (billing.go).
//
// State (templates, groups, instances) is set up and read through Go
// methods. Step is the managed instance groups' control loop: it adds
// members up to a group's target size and removes those above it, creates
// the members' instances (after the creation delay, SetCreateDelay), and
// deletes instances, on the injected clock. Faults can be injected:
// throttling (429 rateLimitExceeded), capacity shortages (a group's
// creations fail with ZONE_RESOURCE_POOL_EXHAUSTED in the managed
// instance's lastAttempt, as Compute Engine reports a stock-out, and keep
// being retried), an error for the next call of a method, a failed
// operation, slow operations and slow creation. Preempt takes back a spot
// VM of a group, which recreates it under its name (currentAction
// RECREATING), as Compute Engine does.
//
// Not emulated: authentication (any or no token is accepted), filters and
// orderBy (refused with 400, so that a caller relying on them notices),
// any method not listed above, autoscalers, instance group updates and
// versions, stateful policies, health checks and autohealing, standby
// pools, networking and disks, and fine points of Compute Engine's choice
// of which instances a resize removes (see Step).
package gcpapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// Options configure a Server.
type Options struct {
	// Clock stamps resources and times delays; nil means the real clock.
	Clock clock.WithTicker
	// CreateDelay is how long a member's instance stays PROVISIONING (and
	// the member CREATING) before it is RUNNING. SetCreateDelay changes it.
	CreateDelay time.Duration
	// DeleteDelay is how long a deleted instance stays STOPPING before it
	// is gone.
	DeleteDelay time.Duration
	// OperationDelay is how long an operation stays RUNNING before it is
	// DONE and its effect applied. SetOperationDelay changes it.
	OperationDelay time.Duration
	// ProjectNumber is what the created-by metadata of a group's instances
	// names the project by, as Compute Engine does; default 123456789012.
	ProjectNumber string
	// Seed seeds instance names and SetThrottleFraction, so that runs
	// repeat.
	Seed uint64
	// MachineTypes is the catalog, the same in every zone; nil means
	// DefaultMachineTypes().
	MachineTypes []MachineType
}

// APIError is an error the emulator answers a call with: the HTTP status,
// the reason of its single error item and the message.
type APIError struct {
	Code    int
	Reason  string
	Message string
}

// Error implements error.
func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, e.Message) }

// OperationError is what a failed operation reports: the code of its error
// item (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, ...), a message, and
// the HTTP status Compute Engine puts on it (httpErrorStatusCode).
type OperationError struct {
	Code       string
	Message    string
	HTTPStatus int
}

// Server is the emulated Compute Engine endpoint, an http.Handler. It is
// safe for concurrent use. Its call counters (Calls, AllCalls, Throttled,
// ResetCalls) count by Compute Engine method ID, such as
// "compute.instances.aggregatedList".
type Server struct {
	emulatorkit.Counter

	clock         clock.WithTicker
	projectNumber string

	mu             sync.Mutex
	createDelay    time.Duration
	deleteDelay    time.Duration
	operationDelay time.Duration
	rand           *rand.Rand
	seq            uint64

	machineTypes map[string]MachineType
	templates    map[string]*InstanceTemplate // by path
	groups       map[string]*group            // by path
	instances    map[string]*instance         // by path
	operations   map[string]*operation        // by path

	faults        emulatorkit.Faults[APIError] // one class of calls: ""
	failNextOp    map[string][]OperationError
	shortage      map[string]bool // group names
	zoneShortage  map[string]bool // zones
	onRunning     []func(Instance)
	onDeleted     []func(Instance)
	retryAfterSec int

	billing billingCatalog // the Cloud Billing Catalog's SKUs (billing.go)
}

// New returns an emulator with no template, group or instance.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ProjectNumber == "" {
		opts.ProjectNumber = "123456789012"
	}
	if opts.MachineTypes == nil {
		opts.MachineTypes = DefaultMachineTypes()
	}
	s := &Server{
		clock:          opts.Clock,
		projectNumber:  opts.ProjectNumber,
		createDelay:    opts.CreateDelay,
		deleteDelay:    opts.DeleteDelay,
		operationDelay: opts.OperationDelay,
		rand:           rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x6c65)),
		seq:            1_000_000 + opts.Seed%1000,
		machineTypes:   map[string]MachineType{},
		templates:      map[string]*InstanceTemplate{},
		groups:         map[string]*group{},
		instances:      map[string]*instance{},
		operations:     map[string]*operation{},
		failNextOp:     map[string][]OperationError{},
		shortage:       map[string]bool{},
		zoneShortage:   map[string]bool{},
	}
	for _, m := range opts.MachineTypes {
		s.machineTypes[m.Name] = m
	}
	return s
}

// ThrottleNext makes the next n requests fail as Compute Engine throttles:
// HTTP 429, reason rateLimitExceeded.
func (s *Server) ThrottleNext(n int) {
	s.faults.ThrottleNext("", n)
}

// SetThrottleFraction throttles each request with probability f (0 turns
// it off), drawn from the seeded source of Options.Seed.
func (s *Server) SetThrottleFraction(f float64) {
	s.faults.SetThrottleFraction("", f)
}

// SetRetryAfter makes throttled answers carry Retry-After: seconds (0:
// none, the default, as Compute Engine mostly sends none).
func (s *Server) SetRetryAfter(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfterSec = seconds
}

// FailNext makes the next request of method fail with err; several calls
// queue several failures. Code 0 means 400.
func (s *Server) FailNext(method string, err APIError) {
	s.faults.FailNext(method, err)
}

// FailNextOperation makes the operation of the next accepted request of
// method (a write, such as "compute.instanceGroupManagers.resize") end DONE
// with err, its effect not applied. HTTPStatus 0 means 400.
func (s *Server) FailNextOperation(method string, err OperationError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNextOp[method] = append(s.failNextOp[method], err)
}

// SetCapacityShortage makes the creation of every instance of the groups
// named groupName (in any zone or region) fail with
// ZONE_RESOURCE_POOL_EXHAUSTED (short), retried at every Step, or lifts
// that (not short).
func (s *Server) SetCapacityShortage(groupName string, short bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shortage[groupName] = short
}

// SetZoneCapacityShortage makes creations in zone fail (short) or lifts
// that. A regional group puts new members in its other zones while one is
// short, as Compute Engine does.
func (s *Server) SetZoneCapacityShortage(zone string, short bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zoneShortage[zone] = short
}

// SetCreateDelay sets how long instances created from now on stay
// PROVISIONING.
func (s *Server) SetCreateDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createDelay = d
}

// SetOperationDelay sets how long operations started from now on stay
// RUNNING.
func (s *Server) SetOperationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.operationDelay = d
}

// OnRunning registers f, called (without the emulator's lock held) with
// each instance that reaches RUNNING, created by a group or added with
// AddInstance as RUNNING.
func (s *Server) OnRunning(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRunning = append(s.onRunning, f)
}

// OnDeleted registers f, called (without the emulator's lock held) with each
// instance once it is gone.
func (s *Server) OnDeleted(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeleted = append(s.onDeleted, f)
}

// Run calls Step every interval of the emulator's clock until ctx is done.
func (s *Server) Run(ctx context.Context, interval time.Duration) {
	emulatorkit.Run(ctx, s.clock, interval, s.Step)
}

// nextID returns a fresh number for IDs; the caller holds s.mu.
func (s *Server) nextID() uint64 {
	s.seq++
	return s.seq
}

// admit counts the call and applies injected faults; the caller holds s.mu.
func (s *Server) admit(method string) (*APIError, int) {
	throttled, err, failed := s.faults.Admit(&s.Counter, "", method, s.rand.Float64)
	switch {
	case throttled:
		return &APIError{http.StatusTooManyRequests, "rateLimitExceeded",
			"Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com'."}, s.retryAfterSec
	case failed:
		if err.Code == 0 {
			err.Code = http.StatusBadRequest
		}
		return &err, 0
	}
	return nil, 0
}
