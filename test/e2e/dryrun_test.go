package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// Each controller's dry run: the rescheduler and the labeler record Events of
// what they would do and change nothing on nodes or pods.
func TestControllersDryRun(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	webOnOnDemand(ctx, t, env, 2, 1)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})
	before := nodeState(ctx, t, env)

	config := writeConfig(t, "rescheduler:\n  dryRun: true\n  interval: 10s\nlabeler:\n  dryRun: true\n")
	metrics := testenv.FreeAddr(t)
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "0", "--leader-elect=false")

	waitEventOn(t, env, "od-1", drain.ReasonWouldDrain)
	waitEventOn(t, env, "od-1", "SpotterWouldLabel")
	waitEventOn(t, env, "spot-1", "SpotterWouldLabel")
	// Two more plans: the cycle between them has run to its end, and still
	// nothing changed.
	waitCycles(t, env, metrics, "spotter_rescheduler_plan_duration_seconds_count", 2)
	if after := nodeState(ctx, t, env); after != before {
		t.Errorf("a dry run changed the nodes:\nbefore %s\nafter  %s", before, after)
	}
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "od-1" || p.DeletionTimestamp != nil {
			t.Errorf("a dry run moved or evicted pod %s (on %s, deleting %v)", p.Name, p.Spec.NodeName, p.DeletionTimestamp != nil)
		}
	}
}

// nodeState renders what Spotter could change on the nodes: its label, its
// taints, its drain mark and cordons. (Other taints come and go with the node
// lifecycle controller.)
func nodeState(ctx context.Context, t *testing.T, env *testenv.Env) string {
	t.Helper()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, n := range nodes.Items {
		_, interruptible := n.Labels[labeler.InterruptibleLabel]
		_, marked, _ := drain.MarkOf(&n)
		var taints []string
		for _, taint := range n.Spec.Taints {
			if strings.HasPrefix(taint.Key, "spotter.dev/") {
				taints = append(taints, taint.ToString())
			}
		}
		out += fmt.Sprintf("%s: interruptible=%v marked=%v cordoned=%v taints=%v; ", n.Name, interruptible, marked, n.Spec.Unschedulable, taints)
	}
	return out
}

func waitEventOn(t *testing.T, env *testenv.Env, node, reason string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("Event %s on node %s", reason, node), func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"regarding.name": node, "reason": reason}.String()})
		if err != nil {
			return false, "", err
		}
		return len(list.Items) > 0, "", nil
	})
}

// writeConfig writes a SpotterConfiguration with body (YAML after the
// apiVersion and kind lines) to a file of the test, and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// webOnOnDemand starts the lab's on-demand node od-1 and a Deployment "web"
// of replicas pods (100m CPU each, the grace period given) running on it.
func webOnOnDemand(ctx context.Context, t *testing.T, env *testenv.Env, replicas int32, grace int64) {
	t.Helper()
	env.CreateNodes(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand})
	web := tu.Deployment("web", replicas, tu.CPU("100m"), tu.GracePeriod(grace))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", int(replicas), time.Minute)
}
