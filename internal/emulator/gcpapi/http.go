package gcpapi

import (
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

// maxPage is the most items a list returns at once, and its default, as on
// Compute Engine.
const maxPage = 500

// call is one request being answered.
type call struct {
	r       *http.Request
	project string
	seg     []string // the path after projects/<project>/
	q       url.Values
	base    string
	now     time.Time
}

// handler answers a call with a body (200) or an error; the caller holds
// s.mu.
type handler func(s *Server, c *call) (any, *APIError)

// ServeHTTP answers a Compute Engine v1 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/services/") {
		s.serveBilling(w, r) // the Cloud Billing Catalog (billing.go)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/compute/v1/projects/")
	if !ok || rest == "" {
		writeError(w, &APIError{http.StatusNotFound, "notFound", fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path)}, 0)
		return
	}
	seg := strings.Split(rest, "/")
	c := &call{r: r, project: seg[0], seg: seg[1:], q: r.URL.Query(), base: base(r)}
	method, h := route(r.Method, c.seg)
	if h == nil {
		writeError(w, &APIError{http.StatusNotFound, "notFound", fmt.Sprintf("The requested URL %s (%s) is not emulated.", r.URL.Path, r.Method)}, 0)
		return
	}
	s.mu.Lock()
	c.now = s.clock.Now()
	s.settleOperations(c.now)
	apiErr, retryAfter := s.admit(method)
	var body any
	if apiErr == nil {
		apiErr = checkQuery(c.q)
	}
	if apiErr == nil {
		body, apiErr = h(s, c)
	}
	s.mu.Unlock()
	if apiErr != nil {
		writeError(w, apiErr, retryAfter)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// checkQuery refuses what the emulator does not implement.
func checkQuery(q url.Values) *APIError {
	for _, p := range []string{"filter", "orderBy"} {
		if q.Get(p) != "" {
			return &APIError{http.StatusBadRequest, "invalid", fmt.Sprintf("%s is not emulated", p)}
		}
	}
	return nil
}

// route maps a request to its method ID and handler.
func route(verb string, seg []string) (string, handler) {
	is := func(v string, n int) bool { return verb == v && len(seg) == n }
	switch {
	case is(http.MethodGet, 2) && seg[0] == "aggregated" && seg[1] == "instances":
		return "compute.instances.aggregatedList", (*Server).aggregatedInstances
	case is(http.MethodGet, 2) && seg[0] == "aggregated" && seg[1] == "instanceGroupManagers":
		return "compute.instanceGroupManagers.aggregatedList", (*Server).aggregatedGroups
	case is(http.MethodGet, 3) && seg[0] == "global" && seg[1] == "instanceTemplates":
		return "compute.instanceTemplates.get", (*Server).getTemplate
	case len(seg) < 4 || (seg[0] != "zones" && seg[0] != "regions"):
		return "", nil
	}
	regional := seg[0] == "regions"
	groups := "compute.instanceGroupManagers."
	if regional {
		groups = "compute.regionInstanceGroupManagers."
	}
	kind := seg[2]
	switch {
	case !regional && kind == "instances" && is(http.MethodGet, 3):
		return "compute.instances.list", (*Server).listInstances
	case !regional && kind == "instances" && is(http.MethodGet, 4):
		return "compute.instances.get", (*Server).getInstance
	case !regional && kind == "instances" && is(http.MethodDelete, 4):
		return "compute.instances.delete", (*Server).deleteInstance
	case !regional && kind == "machineTypes" && is(http.MethodGet, 4):
		return "compute.machineTypes.get", (*Server).getMachineType
	case regional && kind == "instanceTemplates" && is(http.MethodGet, 4):
		return "compute.regionInstanceTemplates.get", (*Server).getTemplate
	case kind == "operations" && is(http.MethodGet, 4):
		if regional {
			return "compute.regionOperations.get", (*Server).getOperation
		}
		return "compute.zoneOperations.get", (*Server).getOperation
	case kind == "instanceGroupManagers" && is(http.MethodGet, 4):
		return groups + "get", (*Server).getGroup
	case kind == "instanceGroupManagers" && is(http.MethodPost, 5) && seg[4] == "resize":
		return groups + "resize", (*Server).resize
	case kind == "instanceGroupManagers" && is(http.MethodPost, 5) && seg[4] == "deleteInstances":
		return groups + "deleteInstances", (*Server).deleteInstances
	case kind == "instanceGroupManagers" && is(http.MethodPost, 5) && seg[4] == "listManagedInstances":
		return groups + "listManagedInstances", (*Server).listManaged
	}
	return "", nil
}

// method is the method ID of a call, for FailNextOperation.
func (c *call) method() string {
	m, _ := route(c.r.Method, c.seg)
	return m
}

func notFound(path string) *APIError {
	return &APIError{http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", path)}
}

func invalid(format string, args ...any) *APIError {
	return &APIError{http.StatusBadRequest, "invalid", fmt.Sprintf(format, args...)}
}

// page reads maxResults and pageToken: the offset and size of the page.
func page(q url.Values) (offset, size int, err *APIError) {
	size = maxPage
	if v := q.Get("maxResults"); v != "" {
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 {
			return 0, 0, invalid("Invalid value for field 'maxResults': '%s'.", v)
		}
		if n > 0 && n < maxPage {
			size = n
		}
	}
	if t := q.Get("pageToken"); t != "" {
		n, e := strconv.Atoi(strings.TrimPrefix(t, "page-"))
		if e != nil || n < 0 || !strings.HasPrefix(t, "page-") {
			return 0, 0, invalid("Invalid value for field 'pageToken': '%s'.", t)
		}
		offset = n
	}
	return offset, size, nil
}

func nextToken(offset, size, total int) string {
	if offset+size >= total {
		return ""
	}
	return "page-" + strconv.Itoa(offset+size)
}

// projectInstances returns the project's instances ordered by zone and
// name; the caller holds s.mu.
func (s *Server) projectInstances(project, zone string) []*instance {
	var out []*instance
	for _, i := range s.instances {
		if i.Project == project && (zone == "" || i.Zone == zone) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b *instance) int {
		if c := strings.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (s *Server) aggregatedInstances(c *call) (any, *APIError) {
	offset, size, err := page(c.q)
	if err != nil {
		return nil, err
	}
	all := s.projectInstances(c.project, "")
	out := wireInstanceAggregatedList{Kind: "compute#instanceAggregatedList", ID: "projects/" + c.project + "/aggregated/instances",
		Items: map[string]wireScopedInstances{}, SelfLink: c.base + "projects/" + c.project + "/aggregated/instances",
		NextPageToken: nextToken(offset, size, len(all))}
	for _, i := range all[min(offset, len(all)):min(offset+size, len(all))] {
		k := "zones/" + i.Zone
		sc := out.Items[k]
		sc.Instances = append(sc.Instances, s.instanceJSON(i, c.base))
		out.Items[k] = sc
	}
	return out, nil
}

func (s *Server) listInstances(c *call) (any, *APIError) {
	offset, size, err := page(c.q)
	if err != nil {
		return nil, err
	}
	zone := c.seg[1]
	all := s.projectInstances(c.project, zone)
	out := wireInstanceList{Kind: "compute#instanceList", ID: "projects/" + c.project + "/zones/" + zone + "/instances",
		SelfLink: c.base + "projects/" + c.project + "/zones/" + zone + "/instances", NextPageToken: nextToken(offset, size, len(all))}
	for _, i := range all[min(offset, len(all)):min(offset+size, len(all))] {
		out.Items = append(out.Items, s.instanceJSON(i, c.base))
	}
	return out, nil
}

func (c *call) path() string { return "projects/" + c.project + "/" + strings.Join(c.seg[:4], "/") }

func (s *Server) getInstance(c *call) (any, *APIError) {
	i, ok := s.instances[c.path()]
	if !ok {
		return nil, notFound(c.path())
	}
	return s.instanceJSON(i, c.base), nil
}

func (s *Server) deleteInstance(c *call) (any, *APIError) {
	path := c.path()
	i, ok := s.instances[path]
	if !ok {
		return nil, notFound(path)
	}
	op := s.startOp(c, "delete", path, i.ID, func(now time.Time) {
		if i, ok := s.instances[path]; ok {
			s.startDelete(i, now)
		}
	})
	return s.operationJSON(op, c.base), nil
}

func (s *Server) instanceJSON(i *instance, base string) wireInstance {
	zone := base + "projects/" + i.Project + "/zones/" + i.Zone
	return wireInstance{Kind: "compute#instance", ID: id(i.ID), CreationTimestamp: stamp(i.Created), Name: i.Name,
		MachineType: zone + "/machineTypes/" + i.MachineType, Status: i.Status, Zone: zone, Metadata: metadataOf(i.Metadata),
		Labels: i.Labels, Scheduling: schedulingOf(i.Scheduling), SelfLink: base + i.Path()}
}

func (s *Server) getMachineType(c *call) (any, *APIError) {
	m, ok := s.machineTypes[c.seg[3]]
	if !ok {
		return nil, notFound(c.path())
	}
	zone := c.base + "projects/" + c.project + "/zones/" + c.seg[1]
	out := wireMachineType{Kind: "compute#machineType", ID: id(uint64(len(m.Name))*1000 + uint64(m.GuestCPUs)), Name: m.Name,
		Description: fmt.Sprintf("%d vCPUs, %d GB RAM", m.GuestCPUs, m.MemoryMB/1024), GuestCpus: m.GuestCPUs, MemoryMb: m.MemoryMB,
		IsSharedCPU: m.Name == "e2-medium", Zone: c.seg[1], SelfLink: zone + "/machineTypes/" + m.Name, Architecture: m.Architecture}
	if out.Architecture == "" {
		out.Architecture = "X86_64"
	}
	for _, a := range m.Accelerators {
		out.Accelerators = append(out.Accelerators, wireMachineAccelerator{GuestAcceleratorType: a.Type, GuestAcceleratorCount: a.Count})
	}
	return out, nil
}

func (s *Server) getTemplate(c *call) (any, *APIError) {
	path := "projects/" + c.project + "/" + strings.Join(c.seg, "/")
	t, ok := s.templates[path]
	if !ok {
		return nil, notFound(path)
	}
	out := wireTemplate{Kind: "compute#instanceTemplate", ID: id(uint64(len(path))), CreationTimestamp: stamp(time.Time{}), Name: t.Name,
		Properties: wireTemplateProperties{MachineType: t.MachineType, Scheduling: schedulingOf(t.Scheduling), Labels: t.Labels, Metadata: metadataOf(t.Metadata)},
		SelfLink:   c.base + path}
	for _, a := range t.GuestAccelerators {
		out.Properties.GuestAccelerators = append(out.Properties.GuestAccelerators, wireAcceleratorConfig{AcceleratorType: a.Type, AcceleratorCount: a.Count})
	}
	if t.Region != "" {
		out.Region = c.base + "projects/" + t.Project + "/regions/" + t.Region
	}
	return out, nil
}

// group returns the group a call names; the caller holds s.mu.
func (s *Server) group(c *call) (*group, *APIError) {
	g, ok := s.groups[c.path()]
	if !ok {
		return nil, notFound(c.path())
	}
	return g, nil
}

func (s *Server) groupJSON(g *group, base string) wireGroup {
	out := wireGroup{Kind: "compute#instanceGroupManager", ID: id(g.id), CreationTimestamp: stamp(g.created), Name: g.Name,
		InstanceTemplate: base + g.InstanceTemplate, InstanceGroup: base + strings.Replace(g.Path(), "/instanceGroupManagers/", "/instanceGroups/", 1),
		BaseInstanceName: g.BaseInstanceName, Fingerprint: "c2VlZA==", TargetSize: g.TargetSize, SelfLink: base + g.Path()}
	if g.Region != "" {
		out.Region = base + "projects/" + g.Project + "/regions/" + g.Region
		out.DistributionPolicy = &wireDistributionPolicy{TargetShape: "EVEN"}
		for _, z := range g.Zones {
			out.DistributionPolicy.Zones = append(out.DistributionPolicy.Zones, wireZone{Zone: base + "projects/" + g.Project + "/zones/" + z})
		}
	} else {
		out.Zone = base + "projects/" + g.Project + "/zones/" + g.Zone
	}
	for _, m := range g.members {
		switch m.action {
		case ActionCreating:
			out.CurrentActions.Creating++
		case ActionRecreating:
			out.CurrentActions.Recreating++
		case ActionDeleting:
			out.CurrentActions.Deleting++
		default:
			out.CurrentActions.None++
		}
	}
	out.Status.IsStable = out.CurrentActions.None == len(g.members) && len(g.members) == int(g.TargetSize)
	return out
}

func (s *Server) getGroup(c *call) (any, *APIError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	return s.groupJSON(g, c.base), nil
}

func (s *Server) aggregatedGroups(c *call) (any, *APIError) {
	offset, size, err := page(c.q)
	if err != nil {
		return nil, err
	}
	var all []*group
	for _, k := range slices.Sorted(maps.Keys(s.groups)) {
		if g := s.groups[k]; g.Project == c.project {
			all = append(all, g)
		}
	}
	out := wireGroupAggregatedList{Kind: "compute#instanceGroupManagerAggregatedList", ID: "projects/" + c.project + "/aggregated/instanceGroupManagers",
		Items: map[string]wireScopedGroups{}, SelfLink: c.base + "projects/" + c.project + "/aggregated/instanceGroupManagers",
		NextPageToken: nextToken(offset, size, len(all))}
	for _, g := range all[min(offset, len(all)):min(offset+size, len(all))] {
		k := "zones/" + g.Zone
		if g.Region != "" {
			k = "regions/" + g.Region
		}
		sc := out.Items[k]
		sc.InstanceGroupManagers = append(sc.InstanceGroupManagers, s.groupJSON(g, c.base))
		out.Items[k] = sc
	}
	return out, nil
}

func (s *Server) resize(c *call) (any, *APIError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	v := c.q.Get("size")
	size, e := strconv.Atoi(v)
	if v == "" || e != nil || size < 0 {
		return nil, invalid("Invalid value for field 'size': '%s'. Must be greater than or equal to 0.", v)
	}
	path := g.Path()
	op := s.startOp(c, "compute.instanceGroupManagers.resize", path, g.id, func(time.Time) {
		if g, ok := s.groups[path]; ok {
			g.TargetSize = int32(size)
			s.reconcileMembers(g)
		}
	})
	return s.operationJSON(op, c.base), nil
}

// deleteInstancesRequest is the body of deleteInstances.
type deleteInstancesRequest struct {
	Instances                      []string `json:"instances"`
	SkipInstancesOnValidationError bool     `json:"skipInstancesOnValidationError"`
}

// instanceRef reads zones/<zone>/instances/<name> at the end of a
// reference (a URL, a partial path).
func instanceRef(ref string) (zone, name string, ok bool) {
	parts := strings.Split(ref, "/")
	for i := len(parts) - 4; i >= 0; i-- {
		if parts[i] == "zones" && parts[i+2] == "instances" && i+4 == len(parts) {
			return parts[i+1], parts[i+3], parts[i+1] != "" && parts[i+3] != ""
		}
	}
	return "", "", false
}

func (s *Server) deleteInstances(c *call) (any, *APIError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	var req deleteInstancesRequest
	data, e := io.ReadAll(io.LimitReader(c.r.Body, 8<<20))
	if e == nil {
		e = json.Unmarshal(data, &req)
	}
	if e != nil {
		return nil, invalid("Invalid JSON payload received. %v", e)
	}
	if len(req.Instances) == 0 {
		return nil, &APIError{http.StatusBadRequest, "required", "Required field 'instances' not specified"}
	}
	type ref struct{ zone, name string }
	var refs []ref
	for i, r := range req.Instances {
		zone, name, ok := instanceRef(r)
		found := ok && slices.ContainsFunc(g.members, func(m *member) bool { return m.zone == zone && m.name == name })
		if !found {
			if req.SkipInstancesOnValidationError {
				continue
			}
			return nil, invalid("Invalid value for field 'resource.instances[%d]': '%s'. The instance is not a member of the instance group manager %s.", i, r, g.Name)
		}
		refs = append(refs, ref{zone, name})
	}
	path := g.Path()
	op := s.startOp(c, "compute.instanceGroupManagers.deleteInstances", path, g.id, func(now time.Time) {
		g, ok := s.groups[path]
		if !ok {
			return
		}
		for _, r := range refs {
			i := slices.IndexFunc(g.members, func(m *member) bool { return m.zone == r.zone && m.name == r.name && m.action != ActionDeleting })
			if i < 0 {
				continue
			}
			g.TargetSize = max(g.TargetSize-1, 0)
			s.deleteMember(g, i, now)
		}
	})
	return s.operationJSON(op, c.base), nil
}

func (s *Server) listManaged(c *call) (any, *APIError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	offset, size, err := page(c.q)
	if err != nil {
		return nil, err
	}
	out := wireManagedInstances{NextPageToken: nextToken(offset, size, len(g.members))}
	for _, m := range g.members[min(offset, len(g.members)):min(offset+size, len(g.members))] {
		mi := wireManagedInstance{Instance: c.base + "projects/" + g.Project + "/zones/" + m.zone + "/instances/" + m.name, Name: m.name, CurrentAction: m.action}
		if m.inst != nil {
			mi.ID, mi.InstanceStatus = id(m.inst.ID), m.inst.Status
		}
		if m.lastError != nil {
			mi.LastAttempt = &wireLastAttempt{Errors: &wireOpErrors{Errors: []wireOpError{{Code: m.lastError.Code, Message: m.lastError.Message}}}}
		}
		out.ManagedInstances = append(out.ManagedInstances, mi)
	}
	return out, nil
}

// startOp records the operation of a write, DONE at once without an
// operation delay; the caller holds s.mu.
func (s *Server) startOp(c *call, opType, target string, targetID uint64, effect func(time.Time)) *operation {
	n := s.nextID()
	scope := c.seg[0] + "/" + c.seg[1]
	name := fmt.Sprintf("operation-%d-%013x", c.now.UnixMilli(), n)
	op := &operation{path: "projects/" + c.project + "/" + scope + "/operations/" + name, name: name, scope: scope,
		opType: opType[strings.LastIndex(opType, ".")+1:], target: target, id: n, targetID: targetID,
		insert: c.now, doneAt: c.now.Add(s.operationDelay), effect: effect}
	method := c.method()
	if q := s.failNextOp[method]; len(q) > 0 {
		e := q[0]
		s.failNextOp[method] = q[1:]
		if e.HTTPStatus == 0 {
			e.HTTPStatus = http.StatusBadRequest
		}
		op.err = &e
	}
	s.operations[op.path] = op
	if s.operationDelay <= 0 {
		s.finish(op, c.now)
	}
	return op
}

func (s *Server) getOperation(c *call) (any, *APIError) {
	op, ok := s.operations[c.path()]
	if !ok {
		return nil, notFound(c.path())
	}
	return s.operationJSON(op, c.base), nil
}

func (s *Server) operationJSON(op *operation, base string) wireOperation {
	out := wireOperation{Kind: "compute#operation", ID: id(op.id), Name: op.name, OperationType: op.opType, TargetLink: base + op.target,
		TargetID: id(op.targetID), Status: "RUNNING", User: "spotter@example.iam.gserviceaccount.com", InsertTime: stamp(op.insert),
		StartTime: stamp(op.insert), SelfLink: base + op.path}
	project := strings.SplitN(op.path, "/", 3)[1]
	scope := base + "projects/" + project + "/" + op.scope
	if strings.HasPrefix(op.scope, "regions/") {
		out.Region = scope
	} else {
		out.Zone = scope
	}
	if op.done {
		out.Status, out.Progress, out.EndTime = "DONE", 100, stamp(op.endTime)
		if op.err != nil {
			out.Error = &wireOpErrors{Errors: []wireOpError{{Code: op.err.Code, Message: op.err.Message}}}
			out.HTTPErrorStatusCode = op.err.HTTPStatus
			out.HTTPErrorMessage = strings.ToUpper(http.StatusText(op.err.HTTPStatus))
		}
	}
	return out
}
