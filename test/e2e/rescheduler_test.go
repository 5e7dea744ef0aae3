package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// `spotter controller` empties the on-demand nodes onto spot one by one; a
// watch running the whole time never sees more than one pod of a 3-replica
// Deployment with a PDB maxUnavailable 1 unavailable; the node whose pod is
// pinned to on-demand is never drained and says why in an Event; no Spotter
// mark is left behind.
func TestReschedulerMovesPodsToSpot(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	spotTaint := corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	env.CreateNodes(
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-3", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-4", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4", Taints: []corev1.Taint{spotTaint}},
		lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "4", Taints: []corev1.Taint{spotTaint}},
		lab.NodeSpec{Name: "spot-3", Class: lab.ClassSpot, CPU: "4", Taints: []corev1.Taint{spotTaint}},
	)
	// The pinned pod goes to od-4; the web pods, one per node by anti-affinity,
	// to od-1, od-2 and od-3.
	setUnschedulable(ctx, t, env, true, "spot-1", "spot-2", "spot-3", "od-1", "od-2", "od-3")
	pinned := tu.Deployment("pinned", 1, tu.CPU("100m"), tu.GracePeriod(1), tu.Tolerate("spot", "true"), tu.RequireNodeLabel(lab.CapacityTypeLabel, "on-demand"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, pinned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=pinned", 1, time.Minute)
	setUnschedulable(ctx, t, env, false, "od-1", "od-2", "od-3")
	setUnschedulable(ctx, t, env, true, "od-4")
	waitUntainted(t, env, "od-1", "od-2", "od-3")
	web := tu.Deployment("web", 3, tu.CPU("500m"), tu.GracePeriod(1), tu.Tolerate("spot", "true"), tu.AntiAffinity("web", "kubernetes.io/hostname"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	setUnschedulable(ctx, t, env, false, "spot-1", "spot-2", "spot-3", "od-4")
	waitUntainted(t, env, "spot-1", "spot-2", "spot-3", "od-4")
	waitPDBsComputed(ctx, t, env)

	// The watch: ready web pods, polled all along.
	stopWatch := watchUnavailable(t, env, map[string]int{"web": 3})
	defer stopWatch()

	startRescheduler(t, env)

	testenv.Eventually(t, 2*time.Minute, "every web pod Running on a spot node", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		var where []string
		onSpot := 0
		for _, p := range list.Items {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
			if strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot++
			}
		}
		return onSpot == 3 && len(list.Items) == 3, fmt.Sprint(where), nil
	})
	if w := stopWatch()["web"]; w > 1 {
		t.Errorf("the watch saw %d web pods unavailable at once; the PDB allows 1", w)
	}

	// od-4 keeps its pinned pod and says why.
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=pinned"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != "od-4" {
		t.Errorf("the pinned pod moved: %v %v", err, pods)
	}
	// On a loaded machine kwok's heartbeats can lag and the node lifecycle
	// controller taints the spot nodes for a while: the first verdict then
	// names TaintToleration, and the next one, once they recover, NodeAffinity.
	testenv.Eventually(t, 90*time.Second, "an Event saying why od-4 stays", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"regarding.name": "od-4", "reason": "SpotterNotDrainable"}.String()})
		if err != nil {
			return false, "", err
		}
		var notes []string
		for _, e := range list.Items {
			if strings.Contains(e.Note, "NodeAffinity") {
				return true, "", nil
			}
			notes = append(notes, e.Note)
		}
		return false, fmt.Sprint(notes), nil
	})

	// No Spotter mark is left on any node once the last drain has finished.
	assertNoMarks(t, env)
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// assertNoMarks waits until no node carries a drain's mark or taint, or is
// cordoned, and fails if one still does after 30 s.
func assertNoMarks(t *testing.T, env *testenv.Env) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no node marked, tainted or cordoned by Spotter", func(ctx context.Context) (bool, string, error) {
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var marked []string
		for _, n := range nodes.Items {
			if _, m, _ := drain.MarkOf(&n); m || n.Spec.Unschedulable {
				marked = append(marked, n.Name)
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == drain.DrainingTaintKey {
					marked = append(marked, n.Name+" (taint)")
				}
			}
		}
		return len(marked) == 0, fmt.Sprint(marked), nil
	})
}

// startRescheduler runs `spotter controller` with the rescheduler planning
// every 10 s, no pause between drains and quick eviction retries.
func startRescheduler(t *testing.T, env *testenv.Env) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "spotter.yaml")
	body := `apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
rescheduler:
  interval: 10s
  drainDelay: 0s
  replacementTimeout: 30s
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}
