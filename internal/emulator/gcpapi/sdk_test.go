package gcpapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	testingclock "k8s.io/utils/clock/testing"
)

// env is an emulator behind an httptest server with the official clients
// on it.
type env struct {
	s          *Server
	clock      *testingclock.FakeClock
	instances  *compute.InstancesClient
	groups     *compute.InstanceGroupManagersClient
	regional   *compute.RegionInstanceGroupManagersClient
	templates  *compute.InstanceTemplatesClient
	rtemplates *compute.RegionInstanceTemplatesClient
	types      *compute.MachineTypesClient
}

const project = "lab"

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	opts.Clock = clk
	s := New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	o := []option.ClientOption{option.WithEndpoint(srv.URL), option.WithoutAuthentication()}
	e := &env{s: s, clock: clk}
	var err error
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e.instances, err = compute.NewInstancesRESTClient(ctx, o...)
	check(err)
	e.groups, err = compute.NewInstanceGroupManagersRESTClient(ctx, o...)
	check(err)
	e.regional, err = compute.NewRegionInstanceGroupManagersRESTClient(ctx, o...)
	check(err)
	e.templates, err = compute.NewInstanceTemplatesRESTClient(ctx, o...)
	check(err)
	e.rtemplates, err = compute.NewRegionInstanceTemplatesRESTClient(ctx, o...)
	check(err)
	e.types, err = compute.NewMachineTypesRESTClient(ctx, o...)
	check(err)
	return e
}

// setup creates a spot template and a zonal group of 3, a regional
// template and group of 2 over two zones.
func (e *env) setup(t *testing.T) {
	t.Helper()
	spot, err := e.s.CreateInstanceTemplate(InstanceTemplate{Project: project, Name: "spot", MachineType: "e2-standard-4",
		Scheduling: Scheduling{ProvisioningModel: ProvisioningSpot}, Labels: map[string]string{"goog-k8s-node-pool-name": "spot"},
		Metadata: map[string]string{"kube-env": "NODE_LABELS: a=b\n"}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := e.s.CreateInstanceTemplate(InstanceTemplate{Project: project, Region: "europe-west1", Name: "od", MachineType: "n2-standard-8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []Group{
		{Project: project, Zone: "europe-west1-b", Name: "zonal", InstanceTemplate: spot, TargetSize: 3},
		{Project: project, Region: "europe-west1", Zones: []string{"europe-west1-b", "europe-west1-c"}, Name: "regional", InstanceTemplate: reg, TargetSize: 2},
	} {
		if err := e.s.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	e.s.Step()
}

func apiError(t *testing.T, err error) *googleapi.Error {
	t.Helper()
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		t.Fatalf("error %v (%T) is not a *googleapi.Error", err, err)
	}
	return ge
}

func reasonOf(ge *googleapi.Error) string {
	if len(ge.Errors) == 0 {
		return ""
	}
	return ge.Errors[0].Reason
}

// The client reads what the emulator writes: pages of the aggregated list,
// instances with their scheduling and created-by metadata, groups zonal and
// regional, templates, machine types; and Google's error envelope.
func TestWireFormat(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup(t)
	ctx := context.Background()

	it := e.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: project, MaxResults: ptr(uint32(2))})
	var names []string
	zones := map[string]int{}
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range pair.Value.GetInstances() {
			names = append(names, i.GetName())
			zones[pair.Key]++
			if i.GetStatus() != StatusRunning || !strings.HasSuffix(i.GetZone(), "/zones/"+i.GetZone()[strings.LastIndex(i.GetZone(), "/")+1:]) {
				t.Errorf("instance %v", i)
			}
			var createdBy string
			for _, m := range i.GetMetadata().GetItems() {
				if m.GetKey() == "created-by" {
					createdBy = m.GetValue()
				}
			}
			switch {
			case strings.HasPrefix(i.GetName(), "zonal-"):
				if i.GetScheduling().GetProvisioningModel() != ProvisioningSpot || i.GetLabels()["goog-k8s-node-pool-name"] != "spot" ||
					createdBy != "projects/123456789012/zones/europe-west1-b/instanceGroupManagers/zonal" || !strings.HasSuffix(i.GetMachineType(), "/machineTypes/e2-standard-4") {
					t.Errorf("zonal instance %v", i)
				}
			case strings.HasPrefix(i.GetName(), "regional-"):
				if createdBy != "projects/123456789012/regions/europe-west1/instanceGroupManagers/regional" || i.GetScheduling().GetPreemptible() {
					t.Errorf("regional instance %v", i)
				}
			}
		}
	}
	if len(names) != 5 || zones["zones/europe-west1-b"] != 4 || zones["zones/europe-west1-c"] != 1 {
		t.Errorf("instances %v by zone %v, want 5: 3 zonal and the regional group's spread over two zones", names, zones)
	}
	if n := e.s.Calls("compute.instances.aggregatedList"); n != 3 {
		t.Errorf("%d pages of 2 for 5 instances, want 3", n)
	}

	g, err := e.groups.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal"})
	if err != nil || g.GetTargetSize() != 3 || g.GetCurrentActions().GetNone() != 3 || !g.GetStatus().GetIsStable() ||
		!strings.HasSuffix(g.GetInstanceTemplate(), "projects/lab/global/instanceTemplates/spot") {
		t.Errorf("zonal group %v %v", g, err)
	}
	rg, err := e.regional.Get(ctx, &computepb.GetRegionInstanceGroupManagerRequest{Project: project, Region: "europe-west1", InstanceGroupManager: "regional"})
	if err != nil || rg.GetTargetSize() != 2 || len(rg.GetDistributionPolicy().GetZones()) != 2 || !strings.HasSuffix(rg.GetRegion(), "/regions/europe-west1") {
		t.Errorf("regional group %v %v", rg, err)
	}
	gi := e.groups.AggregatedList(ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: project})
	scopes := map[string]int{}
	for {
		pair, err := gi.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		scopes[pair.Key] += len(pair.Value.GetInstanceGroupManagers())
	}
	if scopes["zones/europe-west1-b"] != 1 || scopes["regions/europe-west1"] != 1 {
		t.Errorf("aggregated groups %v", scopes)
	}
	tmpl, err := e.templates.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: project, InstanceTemplate: "spot"})
	if err != nil || tmpl.GetProperties().GetMachineType() != "e2-standard-4" || tmpl.GetProperties().GetScheduling().GetProvisioningModel() != ProvisioningSpot ||
		len(tmpl.GetProperties().GetMetadata().GetItems()) != 1 || tmpl.GetProperties().GetMetadata().GetItems()[0].GetValue() != "NODE_LABELS: a=b\n" {
		t.Errorf("template %v %v", tmpl, err)
	}
	if rt, err := e.rtemplates.Get(ctx, &computepb.GetRegionInstanceTemplateRequest{Project: project, Region: "europe-west1", InstanceTemplate: "od"}); err != nil ||
		rt.GetProperties().GetMachineType() != "n2-standard-8" {
		t.Errorf("regional template %v %v", rt, err)
	}
	mt, err := e.types.Get(ctx, &computepb.GetMachineTypeRequest{Project: project, Zone: "europe-west1-b", MachineType: "n2-standard-8"})
	if err != nil || mt.GetGuestCpus() != 8 || mt.GetMemoryMb() != 32768 {
		t.Errorf("machine type %v %v", mt, err)
	}

	_, err = e.types.Get(ctx, &computepb.GetMachineTypeRequest{Project: project, Zone: "europe-west1-b", MachineType: "z9-giant"})
	if ge := apiError(t, err); ge.Code != 404 || reasonOf(ge) != "notFound" {
		t.Errorf("unknown machine type: %v", ge)
	}
	_, err = e.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: project, Filter: ptr("name eq x")}).Next()
	if ge := apiError(t, err); ge.Code != 400 {
		t.Errorf("a filter: %v", ge)
	}
}

// Writes answer with operations, RUNNING for the operation delay; the
// effect comes when they are DONE. A failed operation says why.
func TestOperations(t *testing.T) {
	e := newEnv(t, Options{OperationDelay: 10 * time.Second})
	e.setup(t)
	ctx := context.Background()
	op, err := e.regional.Resize(ctx, &computepb.ResizeRegionInstanceGroupManagerRequest{Project: project, Region: "europe-west1", InstanceGroupManager: "regional", Size: 4})
	if err != nil || op.Done() || !strings.HasPrefix(op.Name(), "operation-") {
		t.Fatalf("resize: %v %v", op, err)
	}
	if st, _ := e.s.GroupStatus(Group{Project: project, Region: "europe-west1", Name: "regional"}.Path()); st.TargetSize != 2 {
		t.Errorf("target %d while the operation runs, want 2", st.TargetSize)
	}
	e.clock.Step(10 * time.Second)
	if err := op.Poll(ctx); err != nil || !op.Done() {
		t.Fatalf("poll: %v done %v", err, op.Done())
	}
	st, _ := e.s.GroupStatus(Group{Project: project, Region: "europe-west1", Name: "regional"}.Path())
	if st.TargetSize != 4 || len(st.Members) != 4 {
		t.Errorf("after the operation: target %d, %d members", st.TargetSize, len(st.Members))
	}
	if n := e.s.Calls("compute.regionOperations.get"); n != 1 {
		t.Errorf("%d operation reads", n)
	}

	e.s.SetOperationDelay(0)
	e.s.FailNextOperation("compute.instanceGroupManagers.resize", OperationError{Code: CodeZoneResourcePoolExhausted, Message: "no room", HTTPStatus: 503})
	op, err = e.groups.Resize(ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal", Size: 9})
	if err != nil || !op.Done() {
		t.Fatalf("resize: %v", err)
	}
	if errs := op.Proto().GetError().GetErrors(); len(errs) != 1 || errs[0].GetCode() != CodeZoneResourcePoolExhausted || op.Proto().GetHttpErrorStatusCode() != 503 {
		t.Errorf("failed operation %v", op.Proto())
	}
	if err := op.Poll(ctx); err == nil {
		t.Error("polling a failed operation: no error")
	}
	if st, _ := e.s.GroupStatus(Group{Project: project, Zone: "europe-west1-b", Name: "zonal"}.Path()); st.TargetSize != 3 {
		t.Errorf("a failed resize changed the target to %d", st.TargetSize)
	}
}

// Managed instances: CREATING with the last attempt's error during a
// stock-out; deleteInstances lowers the target and deletes, refuses a
// stranger; the hooks see instances come and go.
func TestManagedInstances(t *testing.T) {
	e := newEnv(t, Options{DeleteDelay: 5 * time.Second})
	var running, deleted []string
	e.s.OnRunning(func(i Instance) { running = append(running, i.Name) })
	e.s.OnDeleted(func(i Instance) { deleted = append(deleted, i.Name) })
	e.setup(t)
	ctx := context.Background()
	if len(running) != 5 {
		t.Errorf("%d instances seen running, want 5", len(running))
	}
	e.s.SetCapacityShortage("zonal", true)
	if _, err := e.groups.Resize(ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal", Size: 4}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	list := func() []*computepb.ManagedInstance {
		t.Helper()
		it := e.groups.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal", MaxResults: ptr(uint32(3))})
		var out []*computepb.ManagedInstance
		for {
			mi, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, mi)
		}
	}
	mis := list()
	if len(mis) != 4 {
		t.Fatalf("%d managed instances, want 4", len(mis))
	}
	short := mis[3]
	if short.GetCurrentAction() != ActionCreating || short.GetInstanceStatus() != "" ||
		short.GetLastAttempt().GetErrors().GetErrors()[0].GetCode() != CodeZoneResourcePoolExhausted {
		t.Errorf("the instance that cannot be created: %v", short)
	}
	if mis[0].GetCurrentAction() != ActionNone || mis[0].GetInstanceStatus() != StatusRunning || mis[0].GetId() == 0 {
		t.Errorf("a running instance: %v", mis[0])
	}

	_, err := e.groups.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal",
		InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{Instances: []string{"zones/europe-west1-b/instances/stranger"}}})
	if ge := apiError(t, err); ge.Code != 400 {
		t.Errorf("deleting a stranger: %v", ge)
	}
	op, err := e.groups.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal",
		InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{Instances: []string{mis[0].GetInstance(), "projects/lab/" + "zones/europe-west1-b/instances/" + short.GetName()}}})
	if err != nil || !op.Done() {
		t.Fatalf("deleteInstances: %v", err)
	}
	st, _ := e.s.GroupStatus(Group{Project: project, Zone: "europe-west1-b", Name: "zonal"}.Path())
	if st.TargetSize != 2 || len(st.Members) != 3 || st.Members[0].CurrentAction != ActionDeleting || st.Members[0].InstanceStatus != StatusStopping {
		t.Errorf("after deleting one running and one not created: %+v", st)
	}
	e.clock.Step(5 * time.Second)
	e.s.Step()
	if len(deleted) != 1 || deleted[0] != mis[0].GetName() {
		t.Errorf("deleted %v", deleted)
	}
	if _, ok := e.s.Instance(Instance{Project: project, Zone: "europe-west1-b", Name: mis[0].GetName()}.Path()); ok {
		t.Error("the deleted instance still exists")
	}
}

// Throttling: 429, reason rateLimitExceeded, with Retry-After when set.
func TestThrottle(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup(t)
	ctx := context.Background()
	e.s.SetRetryAfter(3)
	e.s.ThrottleNext(1)
	_, err := e.groups.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal"})
	ge := apiError(t, err)
	if ge.Code != 429 || reasonOf(ge) != "rateLimitExceeded" || ge.Header.Get("Retry-After") != "3" {
		t.Errorf("throttled: %v %v", ge, ge.Header)
	}
	if _, err := e.groups.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: project, Zone: "europe-west1-b", InstanceGroupManager: "zonal"}); err != nil {
		t.Errorf("after the throttle: %v", err)
	}
	if e.s.Throttled("compute.instanceGroupManagers.get") != 1 || e.s.Calls("compute.instanceGroupManagers.get") != 2 {
		t.Errorf("calls %v", e.s.AllCalls())
	}
	e.s.FailNext("compute.instances.delete", APIError{Code: 403, Reason: "forbidden", Message: "Required 'compute.instances.delete' permission"})
	_, err = e.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: "europe-west1-b", Instance: "x"})
	if ge := apiError(t, err); ge.Code != 403 || reasonOf(ge) != "forbidden" {
		t.Errorf("injected error: %v", ge)
	}
}

func ptr[T any](v T) *T { return &v }
