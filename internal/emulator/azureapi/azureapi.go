// Package azureapi emulates, in process and on the wire, the parts of the
// Azure Resource Manager compute API (Microsoft.Compute, JSON) that a
// node-group provider calls, so that the provider can be tested through the
// official SDK (github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute)
// pointed at an httptest server (arm.ClientOptions with a cloud
// configuration whose Resource Manager endpoint is the server).
//
// Emulated, with the paths, query parameters and bodies the SDK sends and the
// JSON it parses (ARM's resource envelope, nextLink paging, errors as
// {"error":{"code","message"}}):
//
//   - virtualMachineScaleSets: list (of a resource group), get, update
//     (PATCH sku.capacity), delete instances (POST .../delete with
//     instanceIds, which lowers the capacity by as many), Uniform and
//     Flexible orchestration, Regular and Spot priority, eviction policy and
//     billingProfile.maxPrice;
//   - virtualMachineScaleSets/virtualMachines (Uniform): list, with
//     $expand=instanceView (provisioning and power states);
//   - virtualMachines: list of a resource group (Flexible members and
//     standalone VMs; with $expand=instanceView only together with the
//     'virtualMachineScaleSet/id' eq '...' filter, as ARM requires), delete;
//   - resource SKUs: list, with $filter=location eq '...' (vCPUs, MemoryGB,
//     GPUs, CpuArchitectureType);
//   - long-running operations: every write answers with Azure-AsyncOperation
//     and Location headers; the first reports InProgress, then Succeeded or
//     Failed (with the error), the second 202 until done, then 204.
//
// State (scale sets, VMs) is set up and read through Go methods. The world
// moves at every request and at Step (or Run), on the injected clock: a
// scale set gets Creating VMs up to its capacity and loses those above it;
// a Creating VM is Succeeded and running after the creation delay, or Failed
// with AllocationFailed (or the code set) when its scale set is short of
// capacity; a deleted VM is gone after the delete delay; an operation is done
// after the operation delay, once the VMs it created are no longer Creating
// (an increase whose VMs failed fails with their code). Evict evicts a spot
// VM as Azure does: deallocated (evictionPolicy Deallocate) or deleted, the
// capacity lowered (Delete).
//
// Faults can be injected: throttling (429 with Retry-After), an error for the
// next call of a method (SkuNotAvailable, a quota error, ...), allocation
// failures per scale set, slow operations and slow creation. A bearer token
// can be required.
//
// At the same address, the public Retail Prices API (retailprices.go).
//
// Not emulated: authentication beyond comparing a fixed token, any method not
// listed above, other $filter and $select expressions (refused with 400, so
// that a caller relying on them notices), scale set models beyond what is
// listed (networking, disks, extensions, upgrade policies), overprovisioning,
// spot restore, scale-in policies (the newest VMs go first) and Azure's own
// page sizes (pages here hold PageSize items).
package azureapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// Options configure a Server.
type Options struct {
	// Clock stamps resources and times delays; nil means the real clock.
	Clock clock.WithTicker
	// CreateDelay is how long a new VM stays Creating before it runs.
	// SetCreateDelay changes it.
	CreateDelay time.Duration
	// DeleteDelay is how long a deleted VM stays Deleting before it is gone.
	DeleteDelay time.Duration
	// OperationDelay is the least time an operation stays InProgress.
	// SetOperationDelay changes it.
	OperationDelay time.Duration
	// PageSize is the most items a list page holds; default 1000.
	PageSize int
	// SKUs is the catalog of VM sizes, the same in every location; nil
	// means DefaultSKUs().
	SKUs []SKU
	// Token, when set, is the bearer token every request must carry.
	Token string
}

// APIError is an error the emulator answers a call with: the HTTP status,
// ARM's error code and the message.
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Error codes Azure answers with, which the tests inject.
const (
	CodeAllocationFailed                 = "AllocationFailed"
	CodeOverconstrainedAllocationRequest = "OverconstrainedAllocationRequest"
	CodeSkuNotAvailable                  = "SkuNotAvailable"
	CodeOperationNotAllowed              = "OperationNotAllowed"
	CodeTooManyRequests                  = "TooManyRequests"
)

// Methods, as the REST API's operation IDs name them, by which calls are
// counted and faults injected.
const (
	MethodListScaleSets    = "VirtualMachineScaleSets_List"
	MethodGetScaleSet      = "VirtualMachineScaleSets_Get"
	MethodUpdateScaleSet   = "VirtualMachineScaleSets_Update"
	MethodDeleteInstances  = "VirtualMachineScaleSets_DeleteInstances"
	MethodListScaleSetVMs  = "VirtualMachineScaleSetVMs_List"
	MethodListVMs          = "VirtualMachines_List"
	MethodDeleteVM         = "VirtualMachines_Delete"
	MethodListSKUs         = "ResourceSkus_List"
	MethodGetAsyncStatus   = "AsyncOperation_Get"
	MethodGetLocationState = "Location_Get"
)

// Server is the emulated Azure Resource Manager endpoint, an http.Handler.
// It is safe for concurrent use. Its call counters (Calls, AllCalls,
// Throttled, ResetCalls) count by method (MethodListScaleSetVMs, ...).
type Server struct {
	emulatorkit.Counter

	clock    clock.WithTicker
	pageSize int
	token    string

	mu             sync.Mutex
	createDelay    time.Duration
	deleteDelay    time.Duration
	operationDelay time.Duration
	seq            uint64

	skus       map[string]SKU       // by lowercase name
	scaleSets  map[string]*scaleSet // by lowercase resource ID
	vms        map[string]*vm       // by lowercase resource ID
	operations map[string]*operation

	faults        emulatorkit.Faults[APIError] // one class of calls: ""
	retryAfterSec int
	allocFailure  map[string]string // scale set name (lowercase) -> code
	onRunning     []func(VM)
	onDeleted     []func(VM)
	onEvicted     []func(VM)
	pending       []func() // hooks to run once the lock is released

	retail retailCatalog // the Retail Prices API's items (retailprices.go)
}

// New returns an emulator with no scale set or VM.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.SKUs == nil {
		opts.SKUs = DefaultSKUs()
	}
	s := &Server{
		clock:          opts.Clock,
		pageSize:       opts.PageSize,
		token:          opts.Token,
		createDelay:    opts.CreateDelay,
		deleteDelay:    opts.DeleteDelay,
		operationDelay: opts.OperationDelay,
		skus:           map[string]SKU{},
		scaleSets:      map[string]*scaleSet{},
		vms:            map[string]*vm{},
		operations:     map[string]*operation{},
		allocFailure:   map[string]string{},
	}
	for _, k := range opts.SKUs {
		s.skus[strings.ToLower(k.Name)] = k
	}
	return s
}

// ThrottleNext makes the next n requests fail as ARM throttles: HTTP 429,
// code TooManyRequests, with Retry-After (SetRetryAfter).
func (s *Server) ThrottleNext(n int) {
	s.faults.ThrottleNext("", n)
}

// SetRetryAfter sets the Retry-After (seconds) of throttled answers; 0 (the
// default) sends none.
func (s *Server) SetRetryAfter(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfterSec = seconds
}

// FailNext makes the next request of method fail with err; several calls
// queue several failures. Status 0 means 409.
func (s *Server) FailNext(method string, err APIError) {
	s.faults.FailNext(method, err)
}

// SetAllocationFailure makes the VMs the scale set named name (in any
// resource group) creates from now on fail with code (AllocationFailed,
// OverconstrainedAllocationRequest, ...), or lifts that (code "").
func (s *Server) SetAllocationFailure(name, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.allocFailure, strings.ToLower(name))
		return
	}
	s.allocFailure[strings.ToLower(name)] = code
}

// SetCreateDelay sets how long VMs created from now on stay Creating.
func (s *Server) SetCreateDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createDelay = d
}

// SetOperationDelay sets how long operations started from now on stay
// InProgress at least.
func (s *Server) SetOperationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.operationDelay = d
}

// OnRunning registers f, called (without the emulator's lock held) with each
// VM that starts running.
func (s *Server) OnRunning(f func(VM)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRunning = append(s.onRunning, f)
}

// OnDeleted registers f, called (without the lock held) with each VM once it
// is gone.
func (s *Server) OnDeleted(f func(VM)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeleted = append(s.onDeleted, f)
}

// OnEvicted registers f, called (without the lock held) with each spot VM
// Evict deallocates (a VM evicted with evictionPolicy Delete is reported by
// OnDeleted once gone).
func (s *Server) OnEvicted(f func(VM)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEvicted = append(s.onEvicted, f)
}

// Run calls Step every interval of the emulator's clock until ctx is done.
func (s *Server) Run(ctx context.Context, interval time.Duration) {
	emulatorkit.Run(ctx, s.clock, interval, s.Step)
}

// Step moves the world to the clock's now (see the package documentation)
// and runs the hooks of what happened.
func (s *Server) Step() {
	s.mu.Lock()
	s.advance(s.clock.Now())
	s.unlock()
}

// unlock releases the lock and runs the hooks queued while it was held.
func (s *Server) unlock() {
	hooks := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// queue schedules hooks for vm to run once the lock is released; the caller
// holds s.mu.
func (s *Server) queue(hooks []func(VM), v VM) {
	for _, f := range hooks {
		s.pending = append(s.pending, func() { f(v) })
	}
}

// nextID returns a fresh number; the caller holds s.mu.
func (s *Server) nextID() uint64 {
	s.seq++
	return s.seq
}

// admit counts the call and applies injected faults; the caller holds s.mu.
func (s *Server) admit(method string) (*APIError, int) {
	// Azure's throttle has no fraction: nothing to draw.
	throttled, err, failed := s.faults.Admit(&s.Counter, "", method, nil)
	switch {
	case throttled:
		return &APIError{http.StatusTooManyRequests, CodeTooManyRequests,
			"The request is being throttled as the limit has been reached for operation type - Read_30Min. Please try again later."}, s.retryAfterSec
	case failed:
		if err.Status == 0 {
			err.Status = http.StatusConflict
		}
		return &err, 0
	}
	return nil, 0
}

func clone[T any](s []T) []T { return slices.Clone(s) }
