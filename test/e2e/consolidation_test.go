package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// A consolidation in the lab (real scheduler, kwok nodes): od-1 holds a pod
// pinned to on-demand capacity and two that could run on spot; od-2 holds a
// larger pinned pod. Neither node empties onto spot alone. spotter controller
// (prices in its configuration) drains od-1: the pinned pod goes to od-2,
// which stays, the others to the spot node, and od-1 is left empty for the
// autoscaler to remove.
func TestConsolidationEmptiesAnOnDemandNode(t *testing.T) {
	env, ctx, deploy := consolidationLab(t)

	env.CreateNodes(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "2"})
	env.WaitForNodeReady("od-1", time.Minute)
	deploy("db", 1, tu.CPU("500m"), pinnedToOnDemand)
	deploy("web", 2, tu.CPU("300m"))
	// ops does not fit beside them (1.1 of od-1's 2 CPUs are taken): od-2.
	env.CreateNodes(lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "2"})
	env.WaitForNodeReady("od-2", time.Minute)
	deploy("ops", 1, tu.CPU("1200m"), pinnedToOnDemand)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "2"})
	env.WaitForNodeReady("spot-1", time.Minute)
	if got := appsByNode(ctx, t, env); got["od-1"] != "db,web,web" || got["od-2"] != "ops" {
		t.Fatalf("the setup placed pods otherwise: %v", got)
	}

	startConsolidating(t, env)

	testenv.Eventually(t, 2*time.Minute, "od-1 emptied: db on od-2, web on spot-1", func(ctx context.Context) (bool, string, error) {
		got := appsByNode(ctx, t, env)
		return got["od-1"] == "" && got["od-2"] == "db,ops" && got["spot-1"] == "web,web", fmt.Sprint(got), nil
	})
	waitEventOn(t, env, "od-1", "SpotterDrainable")
}

// The on-demand node that stays is full of pods that may run on spot: the
// consolidation of od-1 moves one cache pod of od-2 to spot first, then db
// takes its place, and od-1 is empty. With the real scheduler, kwok nodes and
// the controller's defaults (the labeler's PreferNoSchedule taint on
// on-demand nodes steers the displaced pod's replacement to spot).
func TestConsolidationMakesRoomOnTheNodeThatStays(t *testing.T) {
	env, ctx, deploy := consolidationLab(t)

	env.CreateNodes(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "2"})
	env.WaitForNodeReady("od-1", time.Minute)
	deploy("db", 1, tu.CPU("700m"), pinnedToOnDemand)
	deploy("web", 2, tu.CPU("600m"))
	// od-1 has 0.1 CPU left: ops and cache go to od-2, which keeps 0.2.
	env.CreateNodes(lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "2"})
	env.WaitForNodeReady("od-2", time.Minute)
	deploy("ops", 1, tu.CPU("800m"), pinnedToOnDemand)
	deploy("cache", 2, tu.CPU("500m"))
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "2"})
	env.WaitForNodeReady("spot-1", time.Minute)
	if got := appsByNode(ctx, t, env); got["od-1"] != "db,web,web" || got["od-2"] != "cache,cache,ops" {
		t.Fatalf("the setup placed pods otherwise: %v", got)
	}

	startConsolidating(t, env)

	testenv.Eventually(t, 2*time.Minute, "od-1 emptied: db on od-2 in a cache pod's place, web and that cache pod on spot-1", func(ctx context.Context) (bool, string, error) {
		got := appsByNode(ctx, t, env)
		return got["od-1"] == "" && got["od-2"] == "cache,db,ops" && got["spot-1"] == "cache,web,web", fmt.Sprint(got), nil
	})
	waitEventOn(t, env, "od-1", "SpotterDrainSucceeded")
}

// A pod its zone spread constraint keeps off spot (the only spot node is in
// the other zone) goes, in a consolidation, to the on-demand node that stays
// in its zone, while the node's other pod goes to spot: od-b1 is emptied.
func TestConsolidationMovesAPodItsSpreadKeepsOffSpot(t *testing.T) {
	env, ctx, deploy := consolidationLab(t)
	onNode := func(name string) tu.PodOption { return tu.RequireNodeLabel(corev1.LabelHostname, name) }

	env.CreateNodes(lab.NodeSpec{Name: "od-b1", Class: lab.ClassOnDemand, CPU: "2", Zone: "zone-b"})
	env.WaitForNodeReady("od-b1", time.Minute)
	deploy("web", 1, tu.CPU("500m"))
	env.CreateNodes(lab.NodeSpec{Name: "od-a", Class: lab.ClassOnDemand, CPU: "2", Zone: "zone-a"})
	env.WaitForNodeReady("od-a", time.Minute)
	deploy("ops", 1, tu.CPU("500m"), onNode("od-a"))
	// One cache pod per zone, and never two more in one zone than in the other.
	deploy("cache", 2, tu.CPU("500m"), tu.Spread("cache", corev1.LabelTopologyZone, 1))
	env.CreateNodes(lab.NodeSpec{Name: "od-b2", Class: lab.ClassOnDemand, CPU: "2", Zone: "zone-b"})
	env.WaitForNodeReady("od-b2", time.Minute)
	deploy("db", 1, tu.CPU("1"), onNode("od-b2"))
	env.CreateNodes(lab.NodeSpec{Name: "spot-a", Class: lab.ClassSpot, CPU: "2", Zone: "zone-a"})
	env.WaitForNodeReady("spot-a", time.Minute)
	if got := appsByNode(ctx, t, env); got["od-b1"] != "cache,web" || got["od-a"] != "cache,ops" || got["od-b2"] != "db" {
		t.Fatalf("the setup placed pods otherwise: %v", got)
	}

	startConsolidating(t, env)
	testenv.Eventually(t, 2*time.Minute, "od-b1 emptied: its cache pod on od-b2, web on spot-a", func(ctx context.Context) (bool, string, error) {
		got := appsByNode(ctx, t, env)
		return got["od-b1"] == "" && got["od-b2"] == "cache,db" && got["spot-a"] == "web" && got["od-a"] == "cache,ops", fmt.Sprint(got), nil
	})
	waitEventOn(t, env, "od-b1", "SpotterDrainSucceeded")
}

// pinnedToOnDemand requires on-demand capacity.
var pinnedToOnDemand = tu.RequireNodeLabel(lab.CapacityTypeLabel, string(lab.ClassOnDemand))

// consolidationLab starts a lab and returns it, the test's context, and a
// function that deploys a Deployment in the default namespace and waits for
// its pods to run.
func consolidationLab(t *testing.T) (*testenv.Env, context.Context, func(string, int32, ...tu.PodOption)) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	return env, ctx, func(name string, replicas int32, opts ...tu.PodOption) {
		t.Helper()
		d := tu.Deployment(name, replicas, append([]tu.PodOption{tu.GracePeriod(1)}, opts...)...)
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForPodsRunning("default", "app="+name, int(replicas), time.Minute)
	}
}

// startConsolidating starts spotter controller with the lab's prices (so
// that consolidations are worth it) and a rescheduler that plans every 10 s
// and does not pause between drains.
func startConsolidating(t *testing.T, env *testenv.Env) {
	config := writeConfig(t, "pricing:\n  currency: USD\n  instanceTypes:\n    lab.large: {onDemand: 0.2, spot: 0.07}\n"+
		"rescheduler:\n  interval: 10s\n  drainDelay: 0s\n")
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// appsByNode lists the running pods of the default namespace by node, as
// their apps sorted and joined ("db,web,web").
func appsByNode(ctx context.Context, t *testing.T, env *testenv.Env) map[string]string {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string][]string{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			apps[p.Spec.NodeName] = append(apps[p.Spec.NodeName], p.Labels["app"])
		}
	}
	out := map[string]string{}
	for node, a := range apps {
		sort.Strings(a)
		out[node] = strings.Join(a, ",")
	}
	return out
}
