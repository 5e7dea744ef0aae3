package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// A drain in two waves whose spot room is taken between them: the migrator
// asks the spot group for one node for the on-demand node's two pods (one
// PodDisruptionBudget, so one pod a wave, the second after the first's
// replacement is Ready). While the first pod terminates, another workload's
// pod takes the new node's room. The second pod no longer fits on spot; the
// migrator asks for one more node and finishes the drain instead of rolling
// it back with a pod evicted for nothing.
func TestMigratorTopsUpADrain(t *testing.T) {
	l := startGroupsLab(t, `interval: 500ms
nodeGroups:
- id: od
  maxSize: 1
  initialSize: 1
  cpu: "4"
  instanceType: m5.xlarge
  pricePerHour: 0.192
- id: spot
  spot: true
  maxSize: 3
  cpu: "4"
  instanceType: m5.xlarge
  pricePerHour: 0.07
  provisioningDelay: 2s
`, 1)
	env := l.env
	ctx := testenv.Context(t, 5*time.Minute)
	// Eight seconds of grace: the first wave's pod is gone, and the second
	// wave checked, well after the other pod has taken the room.
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, tu.Deployment("app", 2, tu.CPU("1500m"), tu.GracePeriod(8)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("app", "app", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other workload waits, Pending, for a node labelled for it.
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, tu.Deployment("other", 1, tu.CPU("1500m"), tu.RequireNodeLabel("lab/other", "yes")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=app", 2, time.Minute)
	waitPDBsComputed(ctx, t, env)
	od := l.nodesOf(ctx, t, "od")
	if len(od) != 1 {
		t.Fatalf("%d on-demand nodes, want 1", len(od))
	}
	l.start(t, "controller", "")

	// Once the drain has started, the spot node it asked for is labelled for
	// the other workload, whose pod takes half of it.
	var first string
	testenv.Eventually(t, 2*time.Minute, "the on-demand node's drain under way and its spot node up", func(ctx context.Context) (bool, string, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, od[0].Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, marked, _ := drain.MarkOf(n)
		spot := l.nodesOf(ctx, t, "spot")
		if len(spot) > 0 {
			first = spot[0].Name
		}
		return marked && len(spot) == 1, fmt.Sprintf("drain mark %v, %d spot nodes", marked, len(spot)), nil
	})
	patch := []byte(`{"metadata":{"labels":{"lab/other":"yes"}}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, first, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 3*time.Minute, "the on-demand node gone, the app's pods on two spot nodes", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var where []string
		onSpot := map[string]bool{}
		for _, p := range pods.Items {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
			if p.Labels["app"] == "app" && strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot[p.Spec.NodeName] = true
			}
		}
		left := len(l.nodesOf(ctx, t, "od"))
		return left == 0 && len(onSpot) == 2, fmt.Sprintf("%d on-demand nodes; pods %v", left, where), nil
	})
	waitEventNote(t, env, od[0].Name, migrator.ReasonSpotTopUp, "1 more node(s) during this node's drain")
	body := scrape(t, env, l.metrics)
	for name, want := range map[string]string{
		`spotter_migrator_top_ups_total{node_group="spot"}`:  "1",
		`spotter_migrator_drains_total{outcome="failed"}`:    "0",
		`spotter_migrator_drains_total{outcome="succeeded"}`: "1",
		`spotter_migrator_pods_evicted_total`:                "2",
	} {
		if got := metricValue(body, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if n := len(l.nodesOf(ctx, t, "spot")); n != 2 {
		t.Errorf("%d spot nodes, want 2 (the one asked for first, and one more)", n)
	}
}
