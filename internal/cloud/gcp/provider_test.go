package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providertest"
	"spotter.dev/spotter/internal/emulator/gcpapi"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// lab is the Compute Engine emulator with the provider on it, built from
// Spotter's configuration (the endpoint pointing at the emulator), through
// the official client, as in production.
type lab struct {
	emu   *gcpapi.Server
	clock *testingclock.FakeClock
	kube  *fake.Clientset
	p     *Provider
}

const project = "spotter-lab"

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// prodGroups selects, in cluster prod: the on-demand group by path, the spot
// pool's groups (one zonal, one regional) by node pool, and the rest by name
// prefix.
var prodGroups = []v1alpha1.GCPNodeGroup{
	{InstanceGroupManager: "zones/us-central1-a/instanceGroupManagers/gke-prod-od-a", MinSize: 1, MaxSize: 10},
	{NodePool: "spot-pool", MaxSize: 5},
	{NamePrefix: "gke-prod-", MaxSize: 3},
}

func newLab(t testing.TB, groups []v1alpha1.GCPNodeGroup) *lab {
	t.Helper()
	return newLabRate(t, groups, 1000)
}

// newLabRate is newLab with the provider's requests limited to
// requestsPerSecond.
func newLabRate(t testing.TB, groups []v1alpha1.GCPNodeGroup, requestsPerSecond int32) *lab {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	emu := gcpapi.New(gcpapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	kube := fake.NewClientset()
	p, err := FromConfig(context.Background(), kube, clk, v1alpha1.GCPConfig{Project: project, ClusterName: "prod", NodeGroups: groups, Endpoint: srv.URL},
		requestsPerSecond, v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"e2-standard-4": {OnDemand: 0.134, Spot: 0.04}}})
	if err != nil {
		t.Fatal(err)
	}
	return &lab{emu: emu, clock: clk, kube: kube, p: p}
}

// The provider's requests are paced by cloud.requestsPerSecond: at 1 a
// second (bursts of 2), lookups of instances not seen before take at least
// a second per request past the first two.
func TestRequestsArePaced(t *testing.T) {
	l := newLabRate(t, prodGroups, 1)
	start := time.Now()
	for i := range 3 {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("gce://%s/us-central1-a/missing-%d", project, i)}}
		if _, err := l.p.Instances(context.Background(), []*corev1.Node{node}); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	for _, n := range l.emu.AllCalls() {
		calls += n
	}
	if calls < 3 {
		t.Fatalf("%d calls (%v), want one a lookup at least: the test sends too few requests to see the pace", calls, l.emu.AllCalls())
	}
	// A lower bound only: a limiter can be slower on a busy machine, never faster.
	if took, least := time.Since(start), time.Duration(calls-2)*time.Second*9/10; took < least {
		t.Errorf("%d requests at 1 a second (burst 2) took %s, want at least %s", calls, took, least)
	}
}

// kube-env of the spot pool, as GKE writes it: the autoscaler's variables
// first.
const spotKubeEnv = `ENABLE_NODE_PROBLEM_DETECTOR: standalone
NODE_LABELS: cloud.google.com/gke-nodepool=spot-pool,cloud.google.com/gke-spot=true
AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=spot-pool,cloud.google.com/gke-spot=true,tier=batch;node_taints=cloud.google.com/gke-spot=true:NoSchedule;kube_reserved=cpu=100m,memory=1Gi,ephemeral-storage=41Gi;os=linux
KUBELET_ARGS: --v=2
`

// groups creates, in project spotter-lab: gke-prod-od-a (2 on-demand
// instances), gke-prod-spot-a (zonal, spot, empty), gke-prod-spot-r
// (regional over two zones, spot, regional template, empty),
// gke-prod-pre-a (preemptible, empty) and gke-staging-od-a (another
// cluster's, 1 instance).
func (l *lab) groups(t testing.TB) {
	t.Helper()
	tmpl := func(name, region, pool, cluster string, s gcpapi.Scheduling, kubeEnv string) string {
		t.Helper()
		md := map[string]string{}
		if kubeEnv != "" {
			md["kube-env"] = kubeEnv
		}
		path, err := l.emu.CreateInstanceTemplate(gcpapi.InstanceTemplate{Project: project, Region: region, Name: name, MachineType: "e2-standard-4", Scheduling: s,
			Labels: map[string]string{ClusterNameLabel: cluster, NodePoolNameLabel: pool}, Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	od := tmpl("gke-prod-od", "", "od-pool", "prod", gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningStandard}, "NODE_LABELS: cloud.google.com/gke-nodepool=od-pool\n")
	spot := tmpl("gke-prod-spot", "", "spot-pool", "prod", gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot, InstanceTerminationAction: "DELETE"}, spotKubeEnv)
	spotR := tmpl("gke-prod-spot-r", "us-central1", "spot-pool", "prod", gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot}, spotKubeEnv)
	pre := tmpl("gke-prod-pre", "", "pre-pool", "prod", gcpapi.Scheduling{Preemptible: true}, "")
	staging := tmpl("gke-staging-od", "", "spot-pool", "staging", gcpapi.Scheduling{}, "")
	for _, g := range []gcpapi.Group{
		{Project: project, Zone: "us-central1-a", Name: "gke-prod-od-a", InstanceTemplate: od, TargetSize: 2},
		{Project: project, Zone: "us-central1-a", Name: "gke-prod-spot-a", InstanceTemplate: spot},
		{Project: project, Region: "us-central1", Zones: []string{"us-central1-a", "us-central1-b"}, Name: "gke-prod-spot-r", InstanceTemplate: spotR},
		{Project: project, Zone: "us-central1-a", Name: "gke-prod-pre-a", InstanceTemplate: pre},
		{Project: project, Zone: "us-central1-a", Name: "gke-staging-od-a", InstanceTemplate: staging, TargetSize: 1},
	} {
		if err := l.emu.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
}

// nodes creates a Node for every instance of the emulator, named as GKE
// names them (the instance's name), and returns them.
func (l *lab) nodes(t testing.TB) []*corev1.Node {
	t.Helper()
	var out []*corev1.Node
	for _, i := range l.emu.Instances() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: i.Name}, Spec: corev1.NodeSpec{ProviderID: i.ProviderID()}}
		if _, err := l.kube.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{}); err != nil {
			if _, err := l.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, n)
	}
	return out
}

func groupPath(zone, name string) string {
	return gcpapi.Group{Project: project, Zone: zone, Name: name}.Path()
}

// A group whose instance template cannot be read (here the first one read,
// refused) is left out; the others are listed, and the group comes back
// once its template reads.
func TestUnreadableGroupIsLeftOut(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	count := func() int {
		t.Helper()
		groups, err := l.p.NodeGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(groups)
	}
	l.emu.FailNext("compute.instanceTemplates.get", gcpapi.APIError{Code: 403, Reason: "forbidden", Message: "Required 'compute.instanceTemplates.get' permission"})
	if n := count(); n != 3 {
		t.Errorf("%d groups, want 3: the cluster's 4 less the one whose template was refused", n)
	}
	if out := l.p.LeftOut(); len(out) != 1 || !strings.Contains(out[0].Err.Error(), "compute.instanceTemplates.get") {
		t.Errorf("left out %v, want the one group, with the refusal", out)
	}
	l.clock.Step(time.Minute) // past GroupTTL
	if n := count(); n != 4 {
		t.Errorf("%d groups once the template reads, want 4", n)
	}
	if out := l.p.LeftOut(); len(out) != 0 {
		t.Errorf("left out %v once every template reads, want none", out)
	}
}

func TestDiscoveryAndSpot(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	groups, err := l.p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, g := range groups {
		got += fmt.Sprintf("%s:%v:%d-%d ", g.ID(), g.Spot(), g.MinSize(), g.MaxSize())
	}
	want := "us-central1-a/gke-prod-od-a:false:1-10 us-central1-a/gke-prod-pre-a:true:0-3 us-central1-a/gke-prod-spot-a:true:0-5 us-central1/gke-prod-spot-r:true:0-5 "
	if got != want {
		t.Errorf("groups %q, want %q (the staging cluster's spot-pool group is not ours; the first entry that selects a group gives its sizes)", got, want)
	}
	// Read once, then served from the cache until GroupTTL passes.
	calls := l.emu.AllCalls()
	if calls["compute.instanceGroupManagers.aggregatedList"] != 1 || calls["compute.instanceTemplates.get"]+calls["compute.regionInstanceTemplates.get"] != 5 {
		t.Errorf("calls %v, want one aggregated list and one get per template", calls)
	}
	if _, err := l.p.NodeGroups(ctx); err != nil || l.emu.Calls("compute.instanceGroupManagers.aggregatedList") != 1 {
		t.Errorf("a second read within GroupTTL asked Compute Engine again: %v", err)
	}
	l.clock.Step(31 * time.Second)
	if _, err := l.p.NodeGroups(ctx); err != nil || l.emu.Calls("compute.instanceGroupManagers.aggregatedList") != 2 ||
		l.emu.Calls("compute.instanceTemplates.get") != 4 {
		t.Errorf("after GroupTTL: %v, calls %v (templates are cached for good)", err, l.emu.AllCalls())
	}

	// Groups named only: a get each, no list; one that does not exist is
	// left out.
	named := newLab(t, []v1alpha1.GCPNodeGroup{
		{InstanceGroupManager: "https://compute.example/compute/v1/projects/spotter-lab/regions/us-central1/instanceGroupManagers/gke-prod-spot-r", MaxSize: 2},
		{InstanceGroupManager: "zones/us-central1-b/instanceGroupManagers/gone", MaxSize: 2},
	})
	named.groups(t)
	groups, err = named.p.NodeGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].ID() != "us-central1/gke-prod-spot-r" {
		t.Fatalf("named groups: %v %v", groups, err)
	}
	if c := named.emu.AllCalls(); c["compute.instanceGroupManagers.aggregatedList"] != 0 || c["compute.regionInstanceGroupManagers.get"] != 1 || c["compute.instanceGroupManagers.get"] != 1 {
		t.Errorf("calls %v, want a get per named group", c)
	}
}

// Instances: one aggregated list (500 a page) when many instances are not
// known, then the cache; instances the list lacks are left out, and asked
// about again only after GoneTTL, by a get each, as the instances of nodes
// that come later.
func TestInstancesBatchedAndCached(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	if err := l.emu.SetTargetSize(groupPath("us-central1-a", "gke-prod-od-a"), 2500); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	nodes := l.nodes(t)
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: corev1.NodeSpec{ProviderID: "gce://" + project + "/us-central1-a/gke-prod-od-a-gone"}}
	nodes = append(nodes, gone, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-gce"}, Spec: corev1.NodeSpec{ProviderID: "kwok://x/y"}})
	l.emu.ResetCalls()
	got, err := l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2501 { // 2,500 of od, 1 of staging
		t.Errorf("%d instances, want 2501", len(got))
	}
	if n := l.emu.Calls("compute.instances.aggregatedList"); n != 6 {
		t.Errorf("%d aggregatedList calls for 2,501 instances, want 6 (pages of 500)", n)
	}
	inst := got[nodes[0].Name]
	if inst.Spot || inst.InstanceType != "e2-standard-4" || inst.Zone != "us-central1-a" || inst.NodeGroup != "us-central1-a/gke-prod-od-a" ||
		!inst.PriceKnown || inst.PricePerHour != 0.134 || inst.ID != nodes[0].Spec.ProviderID {
		t.Errorf("instance %+v", inst)
	}
	l.emu.ResetCalls()
	if _, err := l.p.Instances(ctx, nodes); err != nil || l.emu.Calls("compute.instances.aggregatedList") != 0 {
		t.Errorf("known (and gone) instances asked about again: %d calls, %v", l.emu.Calls("compute.instances.aggregatedList"), err)
	}
	// After GoneTTL the missing instance is looked for again, by itself: a
	// get by its name and zone, not the project's list.
	l.clock.Step(5 * time.Minute)
	if _, err := l.p.Instances(ctx, nodes); err != nil || l.emu.Calls("compute.instances.aggregatedList") != 0 || l.emu.Calls("compute.instances.get") != 1 {
		t.Errorf("after GoneTTL: %v calls, %v; want one get of the missing instance", l.emu.AllCalls(), err)
	}
	// A node that comes later is read by a get, not the project's list.
	l.emu.ResetCalls()
	if err := l.emu.SetTargetSize(groupPath("us-central1-a", "gke-prod-od-a"), 2501); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	more := l.nodes(t)
	got, err = l.p.Instances(ctx, more)
	if err != nil || len(got) != 2502 || l.emu.Calls("compute.instances.aggregatedList") != 0 || l.emu.Calls("compute.instances.get") != 1 {
		t.Errorf("a new node: %d instances, calls %v, %v; want the new one read by one get", len(got), l.emu.AllCalls(), err)
	}
}

// A spot instance is spot by provisioningModel SPOT or preemptible.
func TestInstanceSpot(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	for _, name := range []string{"gke-prod-spot-a", "gke-prod-pre-a"} {
		if err := l.emu.SetTargetSize(groupPath("us-central1-a", name), 1); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
	got, err := l.p.Instances(ctx, l.nodes(t))
	if err != nil {
		t.Fatal(err)
	}
	spot := map[string]int{}
	for _, i := range got {
		if i.Spot {
			spot[i.NodeGroup]++
			if !i.PriceKnown || i.PricePerHour != 0.04 {
				t.Errorf("spot instance %+v: want the configured spot price", i)
			}
		}
	}
	if spot["us-central1-a/gke-prod-spot-a"] != 1 || spot["us-central1-a/gke-prod-pre-a"] != 1 || len(spot) != 2 {
		t.Errorf("spot instances by group %v", spot)
	}
}

func TestSizes(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	g, err := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")
	if err != nil {
		t.Fatal(err)
	}
	providertest.Grow(t, g)
	// Being created: both may be cancelled, not three.
	providertest.CancelOne(t, g)
	l.emu.Step()
	// Running: nothing left to cancel.
	if err := g.DecreaseTargetSize(ctx, 1); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancel a running instance: %v", err)
	}
	insts, err := g.Nodes(ctx)
	if err != nil || len(insts) != 1 || insts[0].State != cloud.InstanceRunning || !insts[0].Spot || insts[0].InstanceType != "e2-standard-4" {
		t.Errorf("nodes %+v %v", insts, err)
	}
	// The minimum holds for cancellations too.
	od, _ := l.p.group(ctx, "us-central1-a/gke-prod-od-a")
	l.emu.SetCapacityShortage("gke-prod-od-a", true)
	if err := od.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := od.DecreaseTargetSize(ctx, 1); err != nil {
		t.Errorf("cancel the one being created: %v", err)
	}
	if st, _ := l.emu.GroupStatus(groupPath("us-central1-a", "gke-prod-od-a")); st.TargetSize != 2 || len(st.Members) != 2 {
		t.Errorf("od after the cancellation: target %d, %d members; want 2 and 2", st.TargetSize, len(st.Members))
	}
}

// A stock-out: the group accepts the resize and cannot create the
// instances; Nodes says so on each, as a *cloud.CapacityUnavailableError,
// and the request can be cancelled. A regional group creates in its other
// zone instead.
func TestCapacityShortage(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	g, _ := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")
	l.emu.SetCapacityShortage("gke-prod-spot-a", true)
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	insts, err := g.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || insts[0].State != cloud.InstanceCreating || !cloud.IsCapacityUnavailable(insts[0].Err) ||
		!strings.Contains(insts[0].Err.Error(), "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Fatalf("nodes %+v, want one request waiting for capacity", insts)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err != nil {
		t.Errorf("cancelling the request that cannot be met: %v", err)
	}
	if st, _ := l.emu.GroupStatus(groupPath("us-central1-a", "gke-prod-spot-a")); st.TargetSize != 0 || len(st.Members) != 0 {
		t.Errorf("after the cancellation: %+v", st)
	}

	r, _ := l.p.group(ctx, "us-central1/gke-prod-spot-r")
	l.emu.SetZoneCapacityShortage("us-central1-a", true)
	if err := r.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	insts, err = r.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range insts {
		if i.State != cloud.InstanceRunning || i.Zone != "us-central1-b" {
			t.Errorf("regional instance %+v, want running in us-central1-b", i)
		}
	}
	if len(insts) != 2 {
		t.Errorf("%d regional instances, want 2", len(insts))
	}
}

// A preempted spot VM is recreated by its group under the same name
// (currentAction RECREATING): until its VM runs again it is an instance
// being created, not a running one, and a stock-out in its zone shows on it.
func TestPreemptedInstanceIsRecreating(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	g, _ := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	l.clock.Step(time.Minute) // past the creation delay
	l.emu.Step()
	state := func() cloud.Instance {
		t.Helper()
		insts, err := g.Nodes(ctx)
		if err != nil || len(insts) != 1 {
			t.Fatalf("nodes %+v, %v; want one", insts, err)
		}
		return insts[0]
	}
	running := state()
	if running.State != cloud.InstanceRunning {
		t.Fatalf("the new instance %+v, want running", running)
	}
	path := strings.TrimPrefix(running.ID, "gce://"+project+"/")
	l.emu.SetCapacityShortage("gke-prod-spot-a", true)
	if err := l.emu.Preempt("projects/" + project + "/zones/" + strings.Replace(path, "/", "/instances/", 1)); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	if got := state(); got.ID != running.ID || got.State != cloud.InstanceCreating || !cloud.IsCapacityUnavailable(got.Err) {
		t.Errorf("the preempted instance %+v, want the same one being recreated, short of capacity", got)
	}
	l.emu.SetCapacityShortage("gke-prod-spot-a", false)
	l.emu.Step()
	l.clock.Step(time.Minute)
	l.emu.Step()
	if got := state(); got.ID != running.ID || got.State != cloud.InstanceRunning {
		t.Errorf("after the recreation %+v, want it running again", got)
	}
}

// Errors of calls and of operations become the seam's typed errors.
func TestErrors(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	g, _ := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")

	l.emu.ThrottleNext(1)
	if _, err := l.p.Instances(ctx, nodes); !cloud.IsThrottled(err) {
		t.Errorf("throttled aggregatedList: %v", err)
	}
	l.emu.SetRetryAfter(7)
	l.emu.ThrottleNext(1)
	if _, err := g.TargetSize(ctx); !cloud.IsThrottled(err) {
		t.Errorf("throttled get: %v", err)
	} else if d, _ := cloud.RetryAfter(err); d != 7*time.Second {
		t.Errorf("retry after %s, want the answer's 7s", d)
	}
	l.emu.FailNext("compute.instanceGroupManagers.get", gcpapi.APIError{Code: 403, Reason: "rateLimitExceeded", Message: "Rate Limit Exceeded"})
	if _, err := g.TargetSize(ctx); !cloud.IsThrottled(err) {
		t.Errorf("403 rateLimitExceeded: %v", err)
	}
	l.emu.FailNext("compute.instanceGroupManagers.resize", gcpapi.APIError{Code: 403, Reason: "quotaExceeded", Message: "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1."})
	if err := g.IncreaseSize(ctx, 1); !cloud.IsCapacityUnavailable(err) {
		t.Errorf("quota exceeded: %v", err)
	}
	for _, code := range []string{gcpapi.CodeZoneResourcePoolExhausted, gcpapi.CodeQuotaExceeded} {
		l.emu.FailNextOperation("compute.instanceGroupManagers.resize", gcpapi.OperationError{Code: code, Message: "no", HTTPStatus: 503})
		err := g.IncreaseSize(ctx, 1)
		var cu *cloud.CapacityUnavailableError
		if !errors.As(err, &cu) || cu.NodeGroup != "us-central1-a/gke-prod-spot-a" {
			t.Errorf("operation failed with %s: %v", code, err)
		}
	}
	l.emu.FailNextOperation("compute.instanceGroupManagers.resize", gcpapi.OperationError{Code: "INTERNAL_ERROR", Message: "oops", HTTPStatus: 500})
	if err := g.IncreaseSize(ctx, 1); err == nil || cloud.IsCapacityUnavailable(err) || !strings.Contains(err.Error(), "INTERNAL_ERROR") {
		t.Errorf("internal error: %v", err)
	}
	if _, err := (&NodeGroup{p: l.p, ref: groupRef{project, "us-central1-a", "", "nope"}}).TargetSize(ctx); !cloud.IsNotFound(err) {
		t.Errorf("a group that does not exist: %v", err)
	}
}

// Operations are polled with backoff until they are done; a throttled poll
// is retried.
func TestSlowOperation(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	g, _ := l.p.group(ctx, "us-central1/gke-prod-spot-r")
	l.emu.SetOperationDelay(20 * time.Second)
	done := make(chan error, 1)
	go func() { done <- g.IncreaseSize(ctx, 1) }()
	providertest.WaitWaiters(t, l.clock)
	l.emu.ThrottleNext(1)
	for range 100 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			polls := l.emu.Calls("compute.regionOperations.get")
			// 0.4-0.5 s doubling to 10 s: about 7 polls in 20 s, and the
			// throttled one.
			if polls < 3 || polls > 12 || l.emu.Throttled("compute.regionOperations.get") != 1 {
				t.Errorf("%d polls (%d throttled) of a 20 s operation", polls, l.emu.Throttled("compute.regionOperations.get"))
			}
			if n, _ := g.TargetSize(ctx); n != 1 {
				t.Errorf("target %d after the operation, want 1", n)
			}
			return
		default:
		}
		l.clock.Step(time.Second)
		providertest.WaitWaitersOrDone(l.clock, done)
	}
	t.Fatal("the operation never finished")
}

func TestDeleteNodes(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	byGroup := map[string][]*corev1.Node{}
	for _, n := range l.nodes(t) {
		i, _ := l.emu.Instance(instancePath(n))
		group := i.Group[strings.LastIndex(i.Group, "/")+1:]
		byGroup[group] = append(byGroup[group], n)
	}
	g, _ := l.p.group(ctx, "us-central1-a/gke-prod-od-a")
	providertest.DeleteNodesRefused(t, g, byGroup["gke-staging-od-a"], byGroup["gke-prod-od-a"])
	victim := byGroup["gke-prod-od-a"][0]
	if err := l.p.DeleteInstance(ctx, victim); err != nil {
		t.Fatal(err)
	}
	st, _ := l.emu.GroupStatus(groupPath("us-central1-a", "gke-prod-od-a"))
	if st.TargetSize != 1 {
		t.Errorf("target %d after deleting one of 2, want 1", st.TargetSize)
	}
	l.emu.Step()
	if _, ok := l.emu.Instance(instancePath(victim)); ok {
		t.Errorf("instance %s still exists", victim.Name)
	}
	if _, err := l.kube.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
		t.Error("the Node object was not deleted")
	}
	if err := l.p.DeleteInstance(ctx, victim); !cloud.IsNotFound(err) {
		t.Errorf("deleting it again: %v", err)
	}
	if got, err := l.p.NodeGroupForNode(ctx, byGroup["gke-prod-od-a"][1]); err != nil || got.ID() != "us-central1-a/gke-prod-od-a" {
		t.Errorf("group of a node: %v %v", got, err)
	}
	if _, err := l.p.NodeGroupForNode(ctx, byGroup["gke-staging-od-a"][0]); !cloud.IsNotFound(err) {
		t.Errorf("group of another cluster's node: %v", err)
	}

	// A node of a group Spotter does not scale goes through its group all
	// the same (else the group would recreate it), with its target lowered.
	if err := l.p.DeleteInstance(ctx, byGroup["gke-staging-od-a"][0]); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.emu.GroupStatus(groupPath("us-central1-a", "gke-staging-od-a")); st.TargetSize != 0 {
		t.Errorf("staging target %d, want 0", st.TargetSize)
	}
	// An instance in no group is deleted directly.
	lone, err := l.emu.AddInstance(gcpapi.Instance{Project: project, Zone: "us-central1-b", Name: "lone", MachineType: "e2-medium"})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lone"}, Spec: corev1.NodeSpec{ProviderID: lone.ProviderID()}}
	l.clock.Step(5 * time.Minute) // the list before it was added took it as gone
	if err := l.p.DeleteInstance(ctx, node); err != nil {
		t.Fatal(err)
	}
	if l.emu.Calls("compute.instances.delete") != 1 {
		t.Errorf("instances.delete called %d times, want 1", l.emu.Calls("compute.instances.delete"))
	}
	if i, _ := l.emu.Instance(lone.Path()); i.Status != gcpapi.StatusStopping {
		t.Errorf("the lone instance is %s", i.Status)
	}
}

// instancePath is the emulator's path of a node's instance.
func instancePath(n *corev1.Node) string {
	k, _ := keyOf(n)
	return "projects/" + k.project + "/zones/" + k.zone + "/instances/" + k.name
}

func TestTemplateNode(t *testing.T) {
	l := newLab(t, prodGroups)
	l.groups(t)
	ctx := context.Background()
	g, _ := l.p.group(ctx, "us-central1-a/gke-prod-spot-a")
	n, err := g.TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[SpotLabel] != "true" || n.Labels[NodePoolLabel] != "spot-pool" || n.Labels["tier"] != "batch" ||
		n.Labels[corev1.LabelInstanceTypeStable] != "e2-standard-4" || n.Labels[corev1.LabelTopologyZone] != "us-central1-a" ||
		n.Labels[corev1.LabelTopologyRegion] != "us-central1" {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != (corev1.Taint{Key: SpotLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	// kube_reserved cpu=100m,memory=1Gi and the 100 MiB eviction threshold.
	providertest.WantResources(t, "e2-standard-4", n, "cpu=4,memory=16Gi,pods=110", "cpu=3900m,memory=15260Mi,pods=110")
	if err := cloud.ValidateNodeGroup(ctx, g); err != nil {
		t.Errorf("a worker group refused: %v", err)
	}
	// The machine type is read once.
	r, _ := l.p.group(ctx, "us-central1/gke-prod-spot-r")
	if _, err := r.TemplateNode(ctx); err != nil || l.emu.Calls("compute.machineTypes.get") != 1 {
		t.Errorf("second template node: %v, %d machine type reads", err, l.emu.Calls("compute.machineTypes.get"))
	}
	od, _ := l.p.group(ctx, "us-central1-a/gke-prod-od-a")
	if n, err := od.TemplateNode(ctx); err != nil || n.Labels[NodePoolLabel] != "od-pool" || n.Labels[SpotLabel] != "" || len(n.Spec.Taints) != 0 {
		t.Errorf("on-demand template node %v %v", n, err)
	}
	pre, _ := l.p.group(ctx, "us-central1-a/gke-prod-pre-a")
	if n, err := pre.TemplateNode(ctx); err != nil || n.Labels[PreemptibleLabel] != "true" || n.Labels[NodePoolLabel] != "pre-pool" {
		t.Errorf("preemptible template node %v %v", n, err)
	}
}

// Without kube_reserved, a template reserves what GKE does; GPUs come from
// the template's accelerators or the machine type's, the architecture and
// max pods from the machine type and the kubelet's arguments. A group with
// a Ready Node copies it instead.
func TestTemplateFromMachineType(t *testing.T) {
	l := newLab(t, []v1alpha1.GCPNodeGroup{{NamePrefix: "gke-prod-", MaxSize: 3}})
	ctx := context.Background()
	for _, c := range []struct {
		name, machine string
		gpus          []gcpapi.Accelerator
		kubeEnv       string
	}{
		{name: "gke-prod-t4", machine: "n1-standard-4", gpus: []gcpapi.Accelerator{{Type: "nvidia-tesla-t4", Count: 2}}, kubeEnv: "KUBELET_ARGS: --v=2 --max-pods=64\n"},
		{name: "gke-prod-l4", machine: "g2-standard-4"},
		{name: "gke-prod-arm", machine: "t2a-standard-4"},
	} {
		md := map[string]string{}
		if c.kubeEnv != "" {
			md["kube-env"] = c.kubeEnv
		}
		path, err := l.emu.CreateInstanceTemplate(gcpapi.InstanceTemplate{Project: project, Name: c.name, MachineType: c.machine,
			Scheduling: gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot}, Labels: map[string]string{ClusterNameLabel: "prod"},
			Metadata: md, GuestAccelerators: c.gpus})
		if err != nil {
			t.Fatal(err)
		}
		size := int32(0)
		if c.name == "gke-prod-arm" {
			size = 2
		}
		if err := l.emu.CreateGroup(gcpapi.Group{Project: project, Zone: "us-central1-a", Name: c.name + "-a", InstanceTemplate: path, TargetSize: size}); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
	template := func(name string) *corev1.Node {
		t.Helper()
		g, err := l.p.group(ctx, "us-central1-a/"+name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := g.TemplateNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// n1-standard-4 (15 GiB): 80m CPU, and 25 % of 4 GiB + 20 % of 4 GiB +
	// 10 % of 7 GiB = 1024 + 819 + 716 MiB (each tier rounded down)
	// reserved, and the 100 MiB eviction threshold.
	providertest.WantResources(t, "n1-standard-4 with two T4s", template("gke-prod-t4-a"),
		"cpu=4,memory=15Gi,pods=64,nvidia.com/gpu=2", "cpu=3920m,memory=12701Mi,pods=64,nvidia.com/gpu=2")
	// g2-standard-4 (16 GiB), its L4 built in: 1024 + 819 + 819 MiB
	// reserved.
	providertest.WantResources(t, "g2-standard-4", template("gke-prod-l4-a"),
		"cpu=4,memory=16Gi,pods=110,nvidia.com/gpu=1", "cpu=3920m,memory=13622Mi,pods=110,nvidia.com/gpu=1")

	// The arm group has two instances: the template is t2a's until one has
	// a Ready Node, then that Node's.
	if n := template("gke-prod-arm-a"); n.Labels[corev1.LabelArchStable] != "arm64" || n.Labels["team"] != "" {
		t.Errorf("t2a-standard-4's template: labels %v, want kubernetes.io/arch=arm64 and no Node's labels", n.Labels)
	}
	for _, n := range l.nodes(t) {
		if !strings.HasPrefix(n.Name, "gke-prod-arm-a") {
			continue
		}
		n.Labels = map[string]string{"team": "a", corev1.LabelArchStable: "arm64"}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		n.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("32")}
		n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("3800m"), "memory": resource.MustParse("12Gi"), "pods": resource.MustParse("32")}
		if _, err := l.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l.clock.Step(6 * time.Minute) // past the template TTL
	n := template("gke-prod-arm-a")
	if n.Labels["team"] != "a" {
		t.Errorf("template of a group with Ready Nodes: labels %v, want the Node's", n.Labels)
	}
	providertest.WantResources(t, "gke-prod-arm-a's Node", n, "cpu=4,memory=16Gi,pods=32", "cpu=3800m,memory=12Gi,pods=32")
}

// A spot group whose nodes would be control-plane nodes is refused.
func TestControlPlaneOnSpotRefused(t *testing.T) {
	l := newLab(t, []v1alpha1.GCPNodeGroup{{NamePrefix: "cp-", MaxSize: 3}, {NamePrefix: "gke-prod-spot-a", MaxSize: 3}})
	l.groups(t)
	path, err := l.emu.CreateInstanceTemplate(gcpapi.InstanceTemplate{Project: project, Name: "cp", MachineType: "e2-standard-4",
		Scheduling: gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot},
		Metadata:   map[string]string{"kube-env": "NODE_LABELS: node-role.kubernetes.io/control-plane=\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.emu.CreateGroup(gcpapi.Group{Project: project, Zone: "us-central1-c", Name: "cp-spot", InstanceTemplate: path}); err != nil {
		t.Fatal(err)
	}
	usable, refused, err := cloud.UsableNodeGroups(context.Background(), l.p)
	if err != nil || len(usable) != 1 || len(refused) != 1 || !cloud.IsControlPlane(refused[0]) {
		t.Errorf("usable %v, refused %v, %v", usable, refused, err)
	}
}

func TestParseKubeEnv(t *testing.T) {
	for _, tc := range []struct {
		name, in       string
		labels, taints string
		reserved       string
		err            string
	}{
		{name: "empty"},
		{name: "node labels and taints", in: "NODE_LABELS: a=b,c=d=e\nNODE_TAINTS: k=v:NoExecute\n", labels: "a=b,c=d=e", taints: "k=v:NoExecute"},
		{name: "the autoscaler's variables win", in: "NODE_LABELS: a=old\nAUTOSCALER_ENV_VARS: node_labels=a=new;node_taints=x=:PreferNoSchedule;kube_reserved=cpu=1,memory=100Mi\n",
			labels: "a=new", taints: "x=:PreferNoSchedule", reserved: "cpu=1,memory=100Mi"},
		{name: "quoted, numbers and booleans", in: "AUTOSCALER_ENV_VARS: \"node_labels='a=1'\"\nENABLE: true\nN: 3\n", labels: "a=1"},
		{name: "not YAML", in: "{", err: "kube-env"},
		{name: "a taint without effect", in: "NODE_TAINTS: k=v\n", err: "want key=value:effect"},
		{name: "an unknown effect", in: "NODE_TAINTS: k=v:Sometimes\n", err: "unknown effect"},
		{name: "a label without value", in: "NODE_LABELS: a\n", err: "not key=value"},
		{name: "a bad quantity", in: "AUTOSCALER_ENV_VARS: kube_reserved=cpu=lots\n", err: "not a quantity"},
		{name: "a bad variable", in: "AUTOSCALER_ENV_VARS: os\n", err: "not name=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := parseKubeEnv(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := join(env.labels); got != tc.labels {
				t.Errorf("labels %q, want %q", got, tc.labels)
			}
			var taints []string
			for _, tt := range env.taints {
				taints = append(taints, tt.Key+"="+tt.Value+":"+string(tt.Effect))
			}
			if got := strings.Join(taints, ","); got != tc.taints {
				t.Errorf("taints %q, want %q", got, tc.taints)
			}
			res := map[string]string{}
			for k, v := range env.reserved {
				res[string(k)] = v.String()
			}
			if got := join(res); got != tc.reserved {
				t.Errorf("reserved %q, want %q", got, tc.reserved)
			}
		})
	}
}

func join(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// FuzzParseKubeEnv: kube-env is outside input; parsing it never panics, and
// what it returns is usable.
func FuzzParseKubeEnv(f *testing.F) {
	f.Add(spotKubeEnv)
	f.Add("NODE_LABELS: a=b\nNODE_TAINTS: k=v:NoSchedule\n")
	f.Add("AUTOSCALER_ENV_VARS: node_taints=k=:NoExecute;kube_reserved=memory=1Gi\n")
	f.Fuzz(func(t *testing.T, s string) {
		env, err := parseKubeEnv(s)
		if err != nil {
			return
		}
		for _, tt := range env.taints {
			if tt.Effect != corev1.TaintEffectNoSchedule && tt.Effect != corev1.TaintEffectPreferNoSchedule && tt.Effect != corev1.TaintEffectNoExecute {
				t.Errorf("taint %v", tt)
			}
		}
		for _, q := range env.reserved {
			if q.Sign() < 0 {
				t.Errorf("negative reservation %v", q)
			}
		}
	})
}

// Instance lookups for 5,000 nodes against the emulator, through the
// client: cold (every instance unknown: one aggregated list, 10 pages) and
// warm (all cached).
//
//	go test ./internal/cloud/gcp -run '^$' -bench Instances -benchtime 3x
func BenchmarkInstances5000(b *testing.B) {
	clk := testingclock.NewFakeClock(epoch)
	emu := gcpapi.New(gcpapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	var nodes []*corev1.Node
	for i := range 5000 {
		s := gcpapi.Scheduling{}
		if i%2 == 0 {
			s.ProvisioningModel = gcpapi.ProvisioningSpot
		}
		inst, err := emu.AddInstance(gcpapi.Instance{Project: project, Zone: []string{"us-central1-a", "us-central1-b", "us-central1-c"}[i%3],
			Name: fmt.Sprintf("gke-bench-pool-%05d", i), MachineType: "e2-standard-4", Scheduling: s})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.Name}, Spec: corev1.NodeSpec{ProviderID: inst.ProviderID()}})
	}
	providertest.BenchmarkInstances(b, nodes, func(ctx context.Context) (cloud.Provider, error) {
		p, err := FromConfig(ctx, nil, clk, v1alpha1.GCPConfig{Project: project, Endpoint: srv.URL, NodeGroups: []v1alpha1.GCPNodeGroup{{NamePrefix: "gke-", MaxSize: 1}}}, 1000, v1alpha1.PricingConfig{})
		return p, err
	}, emu.ResetCalls, func() int { return emu.Calls("compute.instances.aggregatedList") })
}
