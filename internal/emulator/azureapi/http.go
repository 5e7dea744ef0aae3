package azureapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// apiVersion is what the emulator writes into the links it makes; it
// accepts any api-version.
const apiVersion = "2024-11-01"

// call is one request being answered.
type call struct {
	r    *http.Request
	seg  []string // the path's segments, as sent
	low  []string // the same, lowercase (ARM paths are case-insensitive)
	q    url.Values
	base string
	now  time.Time
}

// response is a handler's answer.
type response struct {
	status int
	body   any
	header http.Header
}

type handler func(s *Server, c *call) (*response, *APIError)

// ServeHTTP answers an ARM request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.URL.Path, "/api/retail/prices") {
		s.serveRetailPrices(w, r) // the public Retail Prices API (retailprices.go)
		return
	}
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	c := &call{r: r, seg: seg, q: r.URL.Query(), base: base(r)}
	for _, p := range seg {
		c.low = append(c.low, strings.ToLower(p))
	}
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		writeError(w, &APIError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing or invalid."}, 0)
		return
	}
	method, h := route(r.Method, c.low, c.q)
	if h == nil {
		writeError(w, &APIError{http.StatusNotFound, "NotFound", fmt.Sprintf("%s %s is not emulated.", r.Method, r.URL.Path)}, 0)
		return
	}
	if c.q.Get("api-version") == "" {
		writeError(w, &APIError{http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."}, 0)
		return
	}
	s.mu.Lock()
	c.now = s.clock.Now()
	s.advance(c.now)
	apiErr, retryAfter := s.admit(method)
	var resp *response
	if apiErr == nil {
		resp, apiErr = h(s, c)
	}
	s.unlock()
	if apiErr != nil {
		writeError(w, apiErr, retryAfter)
		return
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	if resp.body == nil {
		w.WriteHeader(resp.status)
		return
	}
	writeJSON(w, resp.status, resp.body)
}

// route maps a request to its method and handler, by its lowercase path
// segments.
func route(verb string, low []string, q url.Values) (string, handler) {
	n := len(low)
	if n < 2 || low[0] != "subscriptions" {
		return "", nil
	}
	compute := func(i int) bool { return n > i+1 && low[i] == "providers" && low[i+1] == "microsoft.compute" }
	switch {
	case n == 5 && compute(2) && low[4] == "skus" && verb == http.MethodGet:
		return MethodListSKUs, (*Server).listSKUs
	case n == 8 && compute(2) && low[4] == "locations" && low[6] == "operations" && verb == http.MethodGet:
		if q.Get("monitor") == "true" {
			return MethodGetLocationState, (*Server).locationState
		}
		return MethodGetAsyncStatus, (*Server).asyncStatus
	case n < 7 || low[2] != "resourcegroups" || !compute(4):
		return "", nil
	}
	kind := low[6]
	switch {
	case kind == "virtualmachinescalesets" && n == 7 && verb == http.MethodGet:
		return MethodListScaleSets, (*Server).listScaleSets
	case kind == "virtualmachinescalesets" && n == 8 && verb == http.MethodGet:
		return MethodGetScaleSet, (*Server).getScaleSet
	case kind == "virtualmachinescalesets" && n == 8 && verb == http.MethodPatch:
		return MethodUpdateScaleSet, (*Server).updateScaleSet
	case kind == "virtualmachinescalesets" && n == 9 && low[8] == "delete" && verb == http.MethodPost:
		return MethodDeleteInstances, (*Server).deleteInstances
	case kind == "virtualmachinescalesets" && n == 9 && low[8] == "virtualmachines" && verb == http.MethodGet:
		return MethodListScaleSetVMs, (*Server).listScaleSetVMs
	case kind == "virtualmachines" && n == 7 && verb == http.MethodGet:
		return MethodListVMs, (*Server).listVMs
	case kind == "virtualmachines" && n == 8 && verb == http.MethodDelete:
		return MethodDeleteVM, (*Server).deleteVM
	}
	return "", nil
}

func base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, e *APIError, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.Header().Set("x-ms-error-code", e.Code)
	writeJSON(w, e.Status, wireError{Error: wireErrorBody{Code: e.Code, Message: e.Message}})
}

func invalid(format string, args ...any) *APIError {
	return &APIError{http.StatusBadRequest, "InvalidParameter", fmt.Sprintf(format, args...)}
}

// only refuses the query parameters (other than api-version) not in allowed.
func only(q url.Values, allowed ...string) *APIError {
	for k := range q {
		if k == "api-version" {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return invalid("The query parameter '%s' is not emulated.", k)
		}
	}
	return nil
}

// page cuts the page of items a call asks for ($skiptoken) and the link to
// the next one.
func page[T any](s *Server, c *call, items []T) ([]T, string, *APIError) {
	offset := 0
	if t := c.q.Get("$skiptoken"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return nil, "", invalid("The skip token '%s' is not valid.", t)
		}
		offset = n
	}
	end := min(offset+s.pageSize, len(items))
	offset = min(offset, len(items))
	next := ""
	if end < len(items) {
		q := url.Values{}
		for k, v := range c.q {
			q[k] = v
		}
		q.Set("$skiptoken", strconv.Itoa(end))
		next = c.base + c.r.URL.Path + "?" + q.Encode()
	}
	return items[offset:end], next, nil
}

// scaleSetOf returns the scale set a call's path names; the caller holds
// s.mu.
func (s *Server) scaleSetOf(c *call) (*scaleSet, *APIError) {
	id := "/" + strings.Join(c.seg[:8], "/")
	set, ok := s.scaleSets[key(id)]
	if !ok {
		return nil, &APIError{http.StatusNotFound, "ResourceNotFound",
			fmt.Sprintf("The Resource 'Microsoft.Compute/virtualMachineScaleSets/%s' under resource group '%s' was not found.", c.seg[7], c.seg[3])}
	}
	return set, nil
}

func (s *Server) scaleSetJSON(set *scaleSet) wireScaleSet {
	capacity := set.Capacity
	mode := "Uniform"
	if set.Flexible {
		mode = "Flexible"
	}
	state := StateSucceeded
	for _, op := range s.operations {
		if !op.done && op.target == set {
			state = StateUpdating
		}
	}
	profile := &wireVMProfile{OSProfile: &wireOSProfile{ComputerNamePrefix: set.ComputerNamePrefix, AdminUsername: "azureuser"}, Priority: set.Priority,
		NetworkProfile: networkProfileOf(set)}
	if set.Priority == PrioritySpot {
		profile.EvictionPolicy = set.EvictionPolicy
		profile.BillingProfile = &wireBilling{MaxPrice: set.MaxPrice}
	}
	return wireScaleSet{ID: set.ID(), Name: set.Name, Type: "Microsoft.Compute/virtualMachineScaleSets", Location: set.Location,
		Tags: set.Tags, Zones: set.Zones, SKU: wireSKU{Name: set.SKU, Tier: "Standard", Capacity: &capacity},
		Properties: wireScaleSetProps{OrchestrationMode: mode, ProvisioningState: state, UniqueID: set.uniqueID,
			PlatformFaultDomainCount: 1, UpgradePolicy: map[string]string{"mode": "Manual"}, VirtualMachineProfile: profile, TimeCreated: set.created}}
}

func (s *Server) listScaleSets(c *call) (*response, *APIError) {
	if err := only(c.q, "$skiptoken"); err != nil {
		return nil, err
	}
	prefix := key("/"+strings.Join(c.seg[:7], "/")) + "/"
	var all []wireScaleSet
	for _, k := range slices.Sorted(maps.Keys(s.scaleSets)) {
		if strings.HasPrefix(k, prefix) {
			all = append(all, s.scaleSetJSON(s.scaleSets[k]))
		}
	}
	items, next, err := page(s, c, all)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: wireList[wireScaleSet]{Value: nonNil(items), NextLink: next}}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) getScaleSet(c *call) (*response, *APIError) {
	set, err := s.scaleSetOf(c)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: s.scaleSetJSON(set)}, nil
}

func readJSON(c *call, out any) *APIError {
	data, err := io.ReadAll(io.LimitReader(c.r.Body, 8<<20))
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return &APIError{http.StatusBadRequest, "InvalidRequestContent", fmt.Sprintf("The request content was invalid and could not be deserialized: %v", err)}
	}
	return nil
}

func (s *Server) updateScaleSet(c *call) (*response, *APIError) {
	set, err := s.scaleSetOf(c)
	if err != nil {
		return nil, err
	}
	if err := only(c.q); err != nil {
		return nil, err
	}
	var body wireScaleSetUpdate
	if err := readJSON(c, &body); err != nil {
		return nil, err
	}
	op := s.startOp(set, c.now)
	if body.SKU != nil && body.SKU.Capacity != nil {
		if *body.SKU.Capacity < 0 {
			delete(s.operations, op.id)
			return nil, invalid("The value %d of parameter 'sku.capacity' is out of range. Value must be at least 0.", *body.SKU.Capacity)
		}
		before := s.setVMs(set)
		set.Capacity = *body.SKU.Capacity
		s.reconcile(set, c.now)
		for _, v := range s.setVMs(set) {
			if !contains(before, v) {
				op.waitCreate = append(op.waitCreate, v)
			}
		}
	}
	return &response{status: http.StatusOK, body: s.scaleSetJSON(set), header: s.opHeaders(c, op)}, nil
}

func contains(vms []*vm, v *vm) bool {
	for _, x := range vms {
		if x == v {
			return true
		}
	}
	return false
}

// setVMs returns set's VMs not being deleted, by resource ID; the caller
// holds s.mu.
func (s *Server) setVMs(set *scaleSet) []*vm {
	var out []*vm
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		if v := s.vms[k]; v.set == set && !v.deleting() {
			out = append(out, v)
		}
	}
	return out
}

func (s *Server) deleteInstances(c *call) (*response, *APIError) {
	set, err := s.scaleSetOf(c)
	if err != nil {
		return nil, err
	}
	if err := only(c.q, "forceDeletion"); err != nil {
		return nil, err
	}
	var body wireInstanceIDs
	if err := readJSON(c, &body); err != nil {
		return nil, err
	}
	if len(body.InstanceIDs) == 0 {
		return nil, invalid("The parameter 'instanceIds' is required and must not be empty.")
	}
	var victims []*vm
	for _, id := range body.InstanceIDs {
		var found *vm
		for _, v := range s.vms {
			if v.set == set && strings.EqualFold(v.InstanceID, id) {
				found = v
			}
		}
		if found == nil {
			return nil, invalid("The provided instanceId %s is not an active Virtual Machine Scale Set VM instanceId.", id)
		}
		victims = append(victims, found)
	}
	op := s.startOp(set, c.now)
	for _, v := range victims {
		if !v.deleting() {
			set.Capacity = max(set.Capacity-1, 0)
			s.startDelete(v, c.now)
		}
		op.waitGone = append(op.waitGone, v)
	}
	return &response{status: http.StatusAccepted, header: s.opHeaders(c, op)}, nil
}

// statuses is a VM's instance view statuses.
func statuses(v *vm) []wireStatus {
	st := strings.ToLower(v.ProvisioningState)
	out := []wireStatus{{Code: "ProvisioningState/" + st, Level: "Info", DisplayStatus: "Provisioning " + st}}
	if v.ProvisioningState == StateFailed {
		out[0] = wireStatus{Code: "ProvisioningState/failed/" + v.FailureCode, Level: "Error", DisplayStatus: "Provisioning failed",
			Message: failureMessage(v.FailureCode, v.Size)}
	}
	if v.PowerState != "" {
		display := map[string]string{PowerStarting: "VM starting", PowerRunning: "VM running", PowerDeallocating: "VM deallocating", PowerDeallocated: "VM deallocated"}
		out = append(out, wireStatus{Code: "PowerState/" + v.PowerState, Level: "Info", DisplayStatus: display[v.PowerState]})
	}
	return out
}

// failureMessage is the message Azure gives with an allocation failure.
func failureMessage(code, size string) string {
	switch code {
	case CodeAllocationFailed:
		return fmt.Sprintf("Allocation failed. We do not have sufficient capacity for the requested VM size %s in this region. Read more about improving likelihood of allocation success.", size)
	case CodeOverconstrainedAllocationRequest:
		return fmt.Sprintf("Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too restrictive: VM size %s, Priority Spot.", size)
	}
	return "Provisioning failed: " + code + "."
}

func (s *Server) vmJSON(v *vm, instanceView bool) wireVM {
	out := wireVM{ID: v.ID(), Name: v.Name, Location: v.Location,
		Properties: wireVMProps{VMID: v.vmID, ProvisioningState: v.ProvisioningState, TimeCreated: v.Created,
			OSProfile: &wireOSProfile{ComputerName: v.ComputerName, AdminUsername: "azureuser"}}}
	if v.Zone != "" {
		out.Zones = []string{v.Zone}
	}
	if v.set != nil && !v.Flexible {
		applied := true
		out.Type, out.InstanceID = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", v.InstanceID
		out.SKU = &wireSKU{Name: v.Size, Tier: "Standard"}
		out.Properties.LatestModelApplied = &applied
	} else {
		out.Type = "Microsoft.Compute/virtualMachines"
		out.Properties.HardwareProfile = &wireHardware{VMSize: v.Size}
		out.Properties.Priority = v.Priority
		if v.Priority == PrioritySpot {
			out.Properties.EvictionPolicy = v.EvictionPolicy
			out.Properties.BillingProfile = &wireBilling{MaxPrice: v.MaxPrice}
		}
		if v.set != nil {
			out.Properties.VirtualMachineScaleSet = &wireSubResource{ID: v.set.ID()}
		}
	}
	if instanceView {
		out.Properties.InstanceView = &wireInstanceView{ComputerName: v.ComputerName, Statuses: statuses(v)}
	}
	return out
}

func (s *Server) listScaleSetVMs(c *call) (*response, *APIError) {
	set, err := s.scaleSetOf(c)
	if err != nil {
		return nil, err
	}
	if err := only(c.q, "$expand", "$skiptoken"); err != nil {
		return nil, err
	}
	expand := c.q.Get("$expand")
	if expand != "" && expand != "instanceView" {
		return nil, invalid("The value '%s' of $expand is not emulated; 'instanceView' is.", expand)
	}
	if set.Flexible {
		// ARM lists a Flexible set's VMs as virtualMachines only.
		return &response{status: http.StatusOK, body: wireList[wireVM]{Value: []wireVM{}}}, nil
	}
	var all []wireVM
	for _, v := range s.sortedSetVMs(set) {
		all = append(all, s.vmJSON(v, expand != ""))
	}
	items, next, apiErr := page(s, c, all)
	if apiErr != nil {
		return nil, apiErr
	}
	return &response{status: http.StatusOK, body: wireList[wireVM]{Value: nonNil(items), NextLink: next}}, nil
}

// sortedSetVMs returns every VM of set (deleting ones too), Uniform ones by
// instance ID as ARM lists them; the caller holds s.mu.
func (s *Server) sortedSetVMs(set *scaleSet) []*vm {
	var out []*vm
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		if v := s.vms[k]; v.set == set {
			out = append(out, v)
		}
	}
	if !set.Flexible {
		num := func(v *vm) int { n, _ := strconv.Atoi(v.InstanceID); return n }
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && num(out[j]) < num(out[j-1]); j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
	}
	return out
}

// scaleSetFilter reads 'virtualMachineScaleSet/id' eq '<id>' (the value
// quoted or not, as clients send it).
func scaleSetFilter(f string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(f), "'virtualMachineScaleSet/id' eq ")
	if !ok {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(rest), "'"), true
}

func (s *Server) listVMs(c *call) (*response, *APIError) {
	if err := only(c.q, "$expand", "$filter", "$skiptoken"); err != nil {
		return nil, err
	}
	expand, filter := c.q.Get("$expand"), c.q.Get("$filter")
	var setID string
	if filter != "" {
		id, ok := scaleSetFilter(filter)
		if !ok {
			return nil, invalid("The $filter '%s' is not emulated; 'virtualMachineScaleSet/id' eq '<id>' is.", filter)
		}
		setID = key(id)
	}
	switch {
	case expand != "" && expand != "instanceView":
		return nil, invalid("The value '%s' of $expand is not emulated; 'instanceView' is.", expand)
	case expand != "" && filter == "":
		// As ARM: the instance view of a list needs the scale set filter.
		return nil, invalid("The $expand=instanceView option can only be specified with a valid $filter option.")
	}
	prefix := key("/"+strings.Join(c.seg[:7], "/")) + "/"
	var all []wireVM
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		v := s.vms[k]
		if !strings.HasPrefix(k, prefix) || (v.set != nil && !v.Flexible) {
			continue
		}
		if setID != "" && (v.set == nil || key(v.set.ID()) != setID) {
			continue
		}
		all = append(all, s.vmJSON(v, expand != ""))
	}
	items, next, apiErr := page(s, c, all)
	if apiErr != nil {
		return nil, apiErr
	}
	return &response{status: http.StatusOK, body: wireList[wireVM]{Value: nonNil(items), NextLink: next}}, nil
}

func (s *Server) deleteVM(c *call) (*response, *APIError) {
	if err := only(c.q, "forceDeletion"); err != nil {
		return nil, err
	}
	v, ok := s.vms[key("/"+strings.Join(c.seg[:8], "/"))]
	if !ok {
		// ARM's DELETE is idempotent: what does not exist is deleted.
		return &response{status: http.StatusNoContent}, nil
	}
	op := s.startOp(v.set, c.now)
	if !v.deleting() && v.set != nil {
		v.set.Capacity = max(v.set.Capacity-1, 0)
	}
	s.startDelete(v, c.now)
	op.waitGone = append(op.waitGone, v)
	return &response{status: http.StatusAccepted, header: s.opHeaders(c, op)}, nil
}

func (s *Server) listSKUs(c *call) (*response, *APIError) {
	if err := only(c.q, "$filter", "includeExtendedLocations"); err != nil {
		return nil, err
	}
	location := ""
	if f := c.q.Get("$filter"); f != "" {
		rest, ok := strings.CutPrefix(strings.TrimSpace(f), "location eq ")
		if !ok {
			return nil, invalid("The $filter '%s' is not supported; only location eq '<location>' is.", f)
		}
		location = strings.Trim(strings.TrimSpace(rest), "'")
	}
	locs := []string{location}
	if location == "" {
		locs = []string{"eastus", "westeurope"}
	}
	var out []wireResourceSKU
	for _, k := range slices.Sorted(maps.Keys(s.skus)) {
		sku := s.skus[k]
		size := strings.TrimPrefix(sku.Name, "Standard_")
		r := wireResourceSKU{ResourceType: "virtualMachines", Name: sku.Name, Tier: "Standard", Size: size, Family: sku.Family, Locations: locs,
			Capabilities: []wireCapability{{"vCPUs", strconv.Itoa(sku.VCPUs)}, {"MemoryGB", strconv.FormatFloat(sku.MemoryGB, 'f', -1, 64)},
				{"vCPUsAvailable", strconv.Itoa(sku.VCPUs)}, {"LowPriorityCapable", "True"}, {"CpuArchitectureType", cmp.Or(sku.Arch, "x64")}},
			Restrictions: []any{}}
		if sku.GPUs > 0 {
			r.Capabilities = append(r.Capabilities, wireCapability{"GPUs", strconv.Itoa(sku.GPUs)})
		}
		for _, l := range locs {
			r.LocationInfo = append(r.LocationInfo, wireLocationInfo{Location: l, Zones: []string{"1", "2", "3"}})
		}
		out = append(out, r)
	}
	return &response{status: http.StatusOK, body: wireList[wireResourceSKU]{Value: nonNil(out)}}, nil
}

// operation is a long-running operation of a write.
type operation struct {
	id           string
	subscription string
	location     string
	target       *scaleSet // nil for a standalone VM's
	doneAt       time.Time
	start        time.Time
	waitCreate   []*vm // done once none is Creating; Failed if one failed
	waitGone     []*vm // done once all are gone
	done         bool
	end          time.Time
	err          *wireErrorBody
}

// startOp records the operation of a write to set (nil: a standalone VM);
// the caller holds s.mu.
func (s *Server) startOp(set *scaleSet, now time.Time) *operation {
	op := &operation{id: fmt.Sprintf("%08x-0000-4000-b000-%012d", uint32(now.Unix()), s.nextID()), target: set, start: now, doneAt: now.Add(s.operationDelay)}
	s.operations[op.id] = op
	return op
}

// settle finishes op when it is due; the caller holds s.mu.
func (s *Server) settle(op *operation, now time.Time) {
	if op.done || now.Before(op.doneAt) {
		return
	}
	var failed *vm
	for _, v := range op.waitCreate {
		if _, alive := s.vms[key(v.ID())]; !alive {
			continue
		}
		switch v.ProvisioningState {
		case StateCreating:
			return
		case StateFailed:
			failed = v
		}
	}
	for _, v := range op.waitGone {
		if _, alive := s.vms[key(v.ID())]; alive {
			return
		}
	}
	op.done, op.end = true, now
	if failed != nil {
		op.err = &wireErrorBody{Code: failed.FailureCode, Message: failureMessage(failed.FailureCode, failed.Size)}
	}
}

// opHeaders are the headers of an accepted write: where to poll it.
func (s *Server) opHeaders(c *call, op *operation) http.Header {
	op.subscription = c.seg[1]
	op.location = "eastus"
	if op.target != nil {
		op.location = op.target.Location
	}
	u := fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s", c.base, op.subscription, op.location, op.id, apiVersion)
	s.settle(op, c.now)
	return http.Header{"Azure-Asyncoperation": {u}, "Location": {u + "&monitor=true"}, "Retry-After": {"1"}}
}

func (s *Server) operationOf(c *call) (*operation, *APIError) {
	op, ok := s.operations[c.seg[7]]
	if !ok {
		return nil, &APIError{http.StatusNotFound, "NotFound", fmt.Sprintf("The operation '%s' was not found.", c.seg[7])}
	}
	return op, nil
}

func (s *Server) asyncStatus(c *call) (*response, *APIError) {
	op, err := s.operationOf(c)
	if err != nil {
		return nil, err
	}
	out := wireOperation{Name: op.id, Status: "InProgress", StartTime: op.start}
	if op.done {
		end := op.end
		out.EndTime, out.Status = &end, "Succeeded"
		if op.err != nil {
			out.Status, out.Error = "Failed", op.err
		}
	}
	return &response{status: http.StatusOK, body: out}, nil
}

func (s *Server) locationState(c *call) (*response, *APIError) {
	op, err := s.operationOf(c)
	if err != nil {
		return nil, err
	}
	switch {
	case !op.done:
		return &response{status: http.StatusAccepted, header: http.Header{"Location": {c.base + c.r.URL.RequestURI()}, "Retry-After": {"1"}}}, nil
	case op.err != nil:
		return nil, &APIError{http.StatusConflict, op.err.Code, op.err.Message}
	}
	return &response{status: http.StatusNoContent}, nil
}

// networkProfileOf is a scale set's network profile as AKS writes it: one
// primary NIC on the nodes' subnet, whose IP configurations are the primary
// one and, with Azure CNI, one per pod (ScaleSet.PodIPs).
func networkProfileOf(set *scaleSet) *wireNetworkProfile {
	nic := wireNICConfig{Name: set.Name}
	nic.Properties.Primary, nic.Properties.EnableIPForwarding = true, true
	subnet := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet", set.Subscription, set.ResourceGroup)
	for i := range set.PodIPs + 1 {
		var c wireIPConfig
		c.Name = fmt.Sprint("ipconfig", i+1)
		c.Properties.Primary = i == 0
		c.Properties.Subnet.ID = subnet
		nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, c)
	}
	return &wireNetworkProfile{NetworkInterfaceConfigurations: []wireNICConfig{nic}}
}
