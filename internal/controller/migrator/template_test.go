package migrator

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// What a group's template says a new node offers bounds the plan: a pod
// that asks for a GPU, or for an architecture, the template lacks is never
// planned onto the group's new nodes, and the template's max pods sets how
// many new nodes the pods need.
func TestTemplateBoundsThePlan(t *testing.T) {
	const instanceType = "m5.xlarge"
	pod := func(name, cpu string, opts ...tu.PodOption) *corev1.Pod {
		base := []tu.PodOption{tu.WithUID(), tu.OnNode("od-1"), tu.OwnedBy("ReplicaSet", "rs-"+name), tu.CPU(cpu), tu.Phase(corev1.PodRunning)}
		return tu.Pod(name, append(base, opts...)...)
	}
	odNode := tu.Node("od-1", tu.OnDemand(), tu.NodeLabel(plan.InstanceTypeLabel, instanceType), tu.Capacity("16", "64Gi"))
	odNode.Status.Capacity[cloud.NvidiaGPU], odNode.Status.Allocatable[cloud.NvidiaGPU] = resource.MustParse("1"), resource.MustParse("1")
	planner := plan.New(plan.Options{
		Pricing: v1alpha1.PricingConfig{InstanceTypes: map[string]v1alpha1.InstancePrice{instanceType: {OnDemand: 0.192, Spot: 0.07}}},
	})
	c := New(nil, nil, fake.New("fake"), planner, nil, nil, testingclock.NewFakeClock(time.Now()), nil, Options{})
	template := func(gpus, pods, arch string) *fake.NodeGroup {
		g := fake.NewNodeGroup("spot", true, 0, 10)
		n, _ := g.TemplateNode(context.Background())
		n.Labels[corev1.LabelArchStable] = arch
		n.Status.Capacity[corev1.ResourcePods], n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse(pods), resource.MustParse(pods)
		if gpus != "0" {
			n.Status.Capacity[cloud.NvidiaGPU], n.Status.Allocatable[cloud.NvidiaGPU] = resource.MustParse(gpus), resource.MustParse(gpus)
		}
		g.SetTemplate(n)
		return g
	}
	check := func(what string, pods []*corev1.Pod, g *fake.NodeGroup, drainable bool, wantNew int) {
		t.Helper()
		snap := &snapshot.Snapshot{Nodes: []*corev1.Node{odNode}, Pods: pods}
		np, need, err := c.planOnGroup(context.Background(), snap, odNode, g)
		if err != nil {
			t.Fatal(err)
		}
		if np.Drainable != drainable || (drainable && need != wantNew) {
			t.Errorf("%s: drainable %v needing %d new nodes (%s), want %v and %d", what, np.Drainable, need, np.Reason, drainable, wantNew)
		}
	}
	gpuPod := pod("train", "1", tu.Request(cloud.NvidiaGPU, "1"))
	check("a GPU pod, a template without GPUs", []*corev1.Pod{gpuPod}, template("0", "110", "amd64"), false, 0)
	check("a GPU pod, a template with one", []*corev1.Pod{gpuPod}, template("1", "110", "amd64"), true, 1)
	armPod := pod("arm", "1", tu.RequireNodeLabel(corev1.LabelArchStable, "arm64"))
	check("an arm64 pod, an amd64 template", []*corev1.Pod{armPod}, template("0", "110", "amd64"), false, 0)
	check("an arm64 pod, an arm64 template", []*corev1.Pod{armPod}, template("0", "110", "arm64"), true, 1)
	var small []*corev1.Pod
	for i := range 6 {
		small = append(small, pod(fmt.Sprint("web-", i), "100m"))
	}
	check("6 small pods, 110 pods a node", small, template("0", "110", "amd64"), true, 1)
	check("6 small pods, 4 pods a node", small, template("0", "4", "amd64"), true, 2)
}

// A node whose instance is protected from deletion (scale-in protection,
// or no group where the provider may not terminate one) is never drained:
// the migrator stops at the instance's lookup, before its group or a plan.
func TestProtectedInstanceIsNotMigrated(t *testing.T) {
	p := fake.New("fake")
	node := tu.Node("od-1", tu.OnDemand())
	p.SetInstance("od-1", cloud.Instance{ID: "fake://od-1", NodeName: "od-1", State: cloud.InstanceRunning, Protected: "protected from scale-in"})
	c := New(nil, nil, p, plan.New(plan.Options{}), nil, nil, testingclock.NewFakeClock(time.Now()), nil, Options{})
	ok, stop := c.migrate(context.Background(), &snapshot.Snapshot{Nodes: []*corev1.Node{node}}, node, nil, nil)
	if ok || stop {
		t.Errorf("migrate = %v, %v; want false, false", ok, stop)
	}
	if n := p.Calls(fake.NodeGroupForNode); n != 0 {
		t.Errorf("%d NodeGroupForNode calls, want none: a protected node goes no further", n)
	}
}
