package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/cli"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The planner's answer is the scheduler's answer: every pod of a node the plan
// calls drainable is placed on a spot node by the real kube-scheduler once
// evicted, and every pod the plan says fits on no spot node stays Pending.
func TestPlanAgreesWithScheduler(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	spotTaint := corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	var nodes []lab.NodeSpec
	for _, z := range []string{"a", "b", "c"} {
		nodes = append(nodes,
			lab.NodeSpec{Name: "od-" + z, Class: lab.ClassOnDemand, Zone: "zone-" + z, CPU: "4", Memory: "16Gi"},
			lab.NodeSpec{Name: "spot-" + z, Class: lab.ClassSpot, Zone: "zone-" + z, CPU: "4", Memory: "16Gi", Taints: []corev1.Taint{spotTaint}})
	}
	env.CreateNodes(nodes...)

	// Workloads start on the on-demand nodes, in a known layout: od-c gets the
	// pods that cannot move to spot, od-a and od-b the rest. Spot nodes are
	// cordoned meanwhile.
	setUnschedulable(ctx, t, env, true, "spot-a", "spot-b", "spot-c", "od-a", "od-b")
	tolerate := tu.Tolerate("spot", "true")
	grace := tu.GracePeriod(1)
	type workload struct {
		name     string
		replicas int32
		opts     []tu.PodOption
		pdb      bool
	}
	total := 0
	create := func(ws ...workload) {
		for _, w := range ws {
			if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, tu.Deployment(w.name, w.replicas, w.opts...), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if w.pdb {
				if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB(w.name, w.name, tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			total += int(w.replicas)
		}
		env.WaitForPodsRunning("default", "", total, 2*time.Minute)
	}
	create(
		workload{"pinned", 1, []tu.PodOption{tolerate, grace, tu.CPU("150m"), tu.RequireNodeLabel(lab.CapacityTypeLabel, "on-demand")}, false},
		workload{"intolerant", 1, []tu.PodOption{grace, tu.CPU("100m")}, false},
	)
	setUnschedulable(ctx, t, env, false, "od-a", "od-b")
	setUnschedulable(ctx, t, env, true, "od-c")
	waitUntainted(t, env, "od-a", "od-b")
	// The two hostPort pods go first: they need one node each, and od-a and
	// od-b are the only two open. Created with the rest, the scheduler could
	// fill one node before the second of them, which would then wait for od-c.
	create(workload{"ports", 2, []tu.PodOption{tolerate, grace, tu.CPU("100m"), tu.HostPort(8080)}, false})
	// The huge pod first, alone: created with the rest, it could land on a
	// node the others had half filled, leave too little there for the
	// second spread pod, whose zone spread allows that node only, and the
	// layout would never settle (od-c opens only after it).
	create(workload{"huge", 1, []tu.PodOption{tolerate, grace, tu.CPU("2500m")}, false})
	create(
		workload{"web", 3, []tu.PodOption{tolerate, grace, tu.CPU("500m"), tu.Memory("512Mi")}, true},
		workload{"spread", 2, []tu.PodOption{tolerate, grace, tu.CPU("250m"), tu.Spread("spread", lab.ZoneLabel, 1)}, false},
		workload{"anti", 2, []tu.PodOption{tolerate, grace, tu.CPU("250m"), tu.AntiAffinity("anti", "kubernetes.io/hostname")}, true},
	)
	setUnschedulable(ctx, t, env, false, "od-c")
	// The spot nodes carry some load of their own: a pod that fills most of spot-a.
	setUnschedulable(ctx, t, env, false, "spot-a", "spot-b", "spot-c")
	// The node lifecycle controller removes the node.kubernetes.io/unschedulable
	// taint a moment after the uncordon; until then the scheduler, and so the
	// plan, would not use these nodes.
	waitUntainted(t, env, "spot-a", "spot-b", "spot-c")
	filler := tu.Pod("filler", tu.OnNode("spot-a"), tu.CPU("2"), tolerate)
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, filler, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "", total+1, time.Minute)
	waitPDBsComputed(ctx, t, env)

	// Plan through the same read path as `spotter plan`.
	snap, err := snapshot.FromCluster(ctx, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(plan.Options{}).Plan(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range p.Nodes {
		t.Logf("plan: %s %s drainable=%v %s", n.Name, n.Class, n.Drainable, n.Reason)
		for _, pp := range n.Pods {
			t.Logf("  %s %s -> %q %s", pp.Name, pp.Action, pp.Destination, pp.Reason)
		}
	}

	// What the plan predicts for each pod we are going to evict.
	type prediction struct {
		pod   corev1.Pod
		fits  bool
		where string
	}
	pods := map[string]corev1.Pod{}
	list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range list.Items {
		pods[pod.Name] = pod
	}
	var predictions []prediction
	drainable := 0
	for _, n := range p.Nodes {
		if n.Class != "on-demand" {
			continue
		}
		if n.Drainable {
			drainable++
		}
		for _, pp := range n.Pods {
			switch {
			case n.Drainable && pp.Action == "move":
				predictions = append(predictions, prediction{pods[pp.Name], true, pp.Destination})
			case strings.Contains(pp.Reason, "spot nodes fit"):
				predictions = append(predictions, prediction{pods[pp.Name], false, pp.Reason})
			}
		}
	}
	if drainable == 0 {
		t.Fatal("the plan calls no node drainable; the test needs at least one")
	}
	var fitsNowhere int
	for _, pr := range predictions {
		if !pr.fits {
			fitsNowhere++
		}
	}
	if fitsNowhere == 0 {
		t.Fatal("the plan says every evicted pod fits; the test needs pods that fit nowhere")
	}

	// Cordon every on-demand node and evict the predicted pods: the scheduler
	// can only use spot nodes now.
	setUnschedulable(ctx, t, env, true, "od-a", "od-b", "od-c")
	byApp := map[string][]prediction{}
	for _, pr := range predictions {
		evictWithRetry(ctx, t, env, pr.pod)
		byApp[pr.pod.Labels["app"]] = append(byApp[pr.pod.Labels["app"]], pr)
	}

	// Per workload: the evicted pods' replacements must be Running on spot
	// nodes when the plan said they fit, and Pending when it said they don't.
	var disagreements []string
	apps := make([]string, 0, len(byApp))
	for app := range byApp {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		preds := byApp[app]
		evicted := map[types.UID]bool{}
		wantFit := 0
		for _, pr := range preds {
			evicted[pr.pod.UID] = true
			if pr.fits {
				wantFit++
			}
		}
		wantPending := len(preds) - wantFit
		var got string
		ok := waitFor(ctx, 60*time.Second, func() bool {
			list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false
			}
			onSpot, pending, stillThere := 0, 0, 0
			for _, pod := range list.Items {
				switch {
				case evicted[pod.UID]:
					stillThere++
				case pod.Spec.NodeName == "":
					if unschedulable(pod) {
						pending++
					}
				case strings.HasPrefix(pod.Spec.NodeName, "spot-") && pod.Status.Phase == corev1.PodRunning && !wasThere(pods, pod):
					onSpot++
				}
			}
			got = fmt.Sprintf("%d new pods Running on spot, %d Pending (unschedulable), %d evicted pods not gone", onSpot, pending, stillThere)
			return stillThere == 0 && onSpot == wantFit && pending == wantPending
		})
		if !ok {
			disagreements = append(disagreements, fmt.Sprintf("%s: plan predicts %d placed on spot and %d Pending; scheduler: %s", app, wantFit, wantPending, got))
		}
	}
	if len(disagreements) > 0 {
		t.Errorf("%d disagreement(s) between the plan and the scheduler:\n  %s", len(disagreements), strings.Join(disagreements, "\n  "))
	}
	t.Logf("%d pods predicted and checked (%d fit on spot, %d fit nowhere), %d drainable nodes", len(predictions), len(predictions)-fitsNowhere, fitsNowhere, drainable)

	// `spotter plan` against the same cluster keeps its JSON contract.
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--kubeconfig", env.Kubeconfig, "-o", "json"}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != 0 {
		t.Fatalf("spotter plan: exit %d: %s", code, errOut.String())
	}
	var contract struct {
		Nodes []struct {
			Name      *string `json:"name"`
			Class     *string `json:"class"`
			Drainable *bool   `json:"drainable"`
			Reason    *string `json:"reason"`
			Pods      []struct {
				Namespace   *string `json:"namespace"`
				Name        *string `json:"name"`
				Destination *string `json:"destination"`
				Reason      *string `json:"reason"`
			} `json:"pods"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out.Bytes(), &contract); err != nil {
		t.Fatalf("spotter plan -o json: %v\n%s", err, out.String())
	}
	if len(contract.Nodes) != 6 {
		t.Errorf("spotter plan -o json lists %d nodes, want 6", len(contract.Nodes))
	}
	for _, n := range contract.Nodes {
		if n.Name == nil || n.Class == nil || n.Drainable == nil || n.Reason == nil || n.Pods == nil {
			t.Errorf("node entry misses a contract field: %s", out.String())
			break
		}
		for _, pp := range n.Pods {
			if pp.Namespace == nil || pp.Name == nil || pp.Destination == nil || pp.Reason == nil {
				t.Errorf("pod entry misses a contract field")
			}
		}
	}
	code = cli.Main([]string{"plan", "--kubeconfig", env.Kubeconfig}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != 0 || !strings.Contains(out.String(), "NODE") || !strings.Contains(out.String(), "on-demand nodes could be emptied onto spot now") {
		t.Errorf("spotter plan table: exit %d\n%s", code, out.String())
	}
}

func wasThere(before map[string]corev1.Pod, pod corev1.Pod) bool {
	old, ok := before[pod.Name]
	return ok && old.UID == pod.UID
}

// unschedulable reports whether the scheduler tried the pod and found no node.
func unschedulable(pod corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func setUnschedulable(ctx context.Context, t *testing.T, env *testenv.Env, value bool, names ...string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, value)
	for _, n := range names {
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitPDBsComputed waits until the disruption controller has computed every
// PDB's status, so that the plan and the Eviction API see the same budgets.
func waitPDBsComputed(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "PodDisruptionBudget status computed", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.PolicyV1().PodDisruptionBudgets("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods == 0 || p.Status.CurrentHealthy < p.Status.ExpectedPods {
				return false, fmt.Sprintf("%s: %+v", p.Name, p.Status), nil
			}
		}
		return true, "", nil
	})
}

// evictWithRetry evicts a pod, retrying while its PDB refuses (429).
func evictWithRetry(ctx context.Context, t *testing.T, env *testenv.Env, pod corev1.Pod) {
	t.Helper()
	var lastErr error
	ok := waitFor(ctx, 90*time.Second, func() bool {
		lastErr = env.Client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		return lastErr == nil || apierrors.IsNotFound(lastErr)
	})
	if !ok {
		t.Fatalf("evicting %s: %v", pod.Name, lastErr)
	}
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return cond()
}

func waitUntainted(t *testing.T, env *testenv.Env, names ...string) {
	t.Helper()
	for _, n := range names {
		testenv.Eventually(t, time.Minute, "the unschedulable taint to leave "+n, func(ctx context.Context) (bool, string, error) {
			node, err := env.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnschedulable {
					return false, fmt.Sprint(node.Spec.Taints), nil
				}
			}
			return true, "", nil
		})
	}
}
