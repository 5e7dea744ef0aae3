package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/emulator/azureimds"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// spotter-agent as a process per kwok node, each with its own metadata
// emulator, in one lab: a GCP preemption with 30 pods, an Azure Preempt that is
// acknowledged, an AWS two-minute notice honouring PDBs, and a rebalance
// recommendation that only taints.
func TestAgent(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 10*time.Minute)

	t.Run("GCP preemption: 30 pods gone before the 30s deadline, rescheduled elsewhere", func(t *testing.T) {
		const pool = "gcp"
		env.CreateNodes(lab.NodeSpec{Name: "gcp-1", Class: lab.ClassSpot, CPU: "32", Labels: map[string]string{poolLabel: pool}})
		workloads := []struct {
			name     string
			replicas int32
			grace    int64
			opts     []tu.PodOption
			pdb      func() (string, tu.PDBOption)
		}{
			{name: "web", replicas: 10, grace: 10, pdb: func() (string, tu.PDBOption) { return "web", tu.MaxUnavailable(1) }},
			{name: "api", replicas: 10, grace: 30, pdb: func() (string, tu.PDBOption) { return "api", tu.MinAvailable(8) }},
			{name: "batch", replicas: 7, grace: 60},
			{name: "dns", replicas: 3, grace: 10, opts: []tu.PodOption{func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }}},
		}
		for _, w := range workloads {
			opts := append([]tu.PodOption{tu.CPU("100m"), tu.GracePeriod(w.grace), tu.RequireNodeLabel(poolLabel, pool)}, w.opts...)
			createDeployment(ctx, t, env, pool, w.name, w.replicas, opts...)
			if w.pdb != nil {
				app, opt := w.pdb()
				pdb := tu.PDB(app, app, opt)
				pdb.Name = pool + "-" + app
				pdb.Spec.Selector.MatchLabels = map[string]string{"app": pool + "-" + app}
				if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		createDaemonSet(ctx, t, env, pool)
		for _, w := range workloads {
			env.WaitForPodsRunning("default", "app="+pool+"-"+w.name, int(w.replicas), 2*time.Minute)
		}
		victims := podsOnNode(ctx, t, env, "gcp-1")
		if len(victims) != 30 {
			t.Fatalf("%d pods on gcp-1, want the 30 of the Deployments", len(victims))
		}
		// Room elsewhere for the replacements.
		env.CreateNodes(lab.NodeSpec{Name: "gcp-2", Class: lab.ClassSpot, CPU: "32", Labels: map[string]string{poolLabel: pool}},
			lab.NodeSpec{Name: "gcp-3", Class: lab.ClassOnDemand, CPU: "32", Labels: map[string]string{poolLabel: pool}})

		emu := gcpmetadata.New(gcpmetadata.Options{})
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		t.Cleanup(emu.Close)
		metrics := startAgent(t, env, "gcp-1", "gcp", srv.URL, "")
		testenv.Eventually(t, 30*time.Second, "the agent to long-poll preempted", func(context.Context) (bool, string, error) {
			return emu.Waiting(gcpmetadata.PreemptedPath) > 0, "", nil
		})

		notice := time.Now()
		emu.SetPreempted(true)
		latency := waitCordoned(t, env, "gcp-1", notice)
		t.Logf("notice to taint and cordon: %s", latency)

		deadline := notice.Add(30 * time.Second)
		waitGone(t, env, victims, time.Until(deadline)+10*time.Second)
		t.Logf("all %d pods gone %s after the notice", len(victims), time.Since(notice).Round(100*time.Millisecond))
		if gone := time.Now(); gone.After(deadline) {
			t.Errorf("the last pod left %s after the 30 s deadline", gone.Sub(deadline).Round(time.Millisecond))
		}
		// The ReplicaSets recreate them and the scheduler places them elsewhere.
		for _, w := range workloads {
			for _, p := range env.WaitForPodsRunning("default", "app="+pool+"-"+w.name, int(w.replicas), 2*time.Minute) {
				if p.Spec.NodeName == "gcp-1" {
					t.Errorf("replacement %s scheduled on the preempted node", p.Name)
				}
			}
		}
		if left := podsOnNode(ctx, t, env, "gcp-1"); len(left) != 0 {
			t.Errorf("pods left on gcp-1: %v", podNames(left))
		}
		body := scrapeAfterDrain(t, env, metrics)
		for _, want := range []string{`spotter_agent_notices_total{cloud="gcp",kind="termination"} 1`, "spotter_agent_deadline_misses_total 0"} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		t.Logf("agent metrics: evicted %s, deleted %s, notice_to_cordon_seconds sum %s",
			metricValue(body, "spotter_agent_pods_evicted_total"), metricValue(body, "spotter_agent_pods_deleted_total"),
			metricValue(body, "spotter_agent_notice_to_cordon_seconds_sum"))
	})

	t.Run("Azure Preempt: drained, then acknowledged; other VMs' events ignored", func(t *testing.T) {
		const pool = "azure"
		providerID := "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/spotpool/virtualMachines/3"
		env.CreateNodes(lab.NodeSpec{Name: "azure-1", Class: lab.ClassSpot, ProviderID: providerID, Labels: map[string]string{poolLabel: pool}})
		createDeployment(ctx, t, env, pool, "web", 3, tu.CPU("100m"), tu.GracePeriod(2), tu.RequireNodeLabel(poolLabel, pool))
		env.WaitForPodsRunning("default", "app=azure-web", 3, time.Minute)
		victims := podsOnNode(ctx, t, env, "azure-1")
		env.CreateNodes(lab.NodeSpec{Name: "azure-2", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})

		emu := azureimds.New(azureimds.Options{VMName: "spotpool_3"})
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		startAgent(t, env, "azure-1", "azure", srv.URL, "")
		testenv.Eventually(t, 30*time.Second, "the agent to poll scheduled events", func(context.Context) (bool, string, error) {
			return emu.Requests("/metadata/scheduledevents") > 0, "", nil
		})
		emu.AddEvent(azureimds.Event{EventID: "other-vm", EventType: "Reboot", Resources: []string{"spotpool_7"}, NotBefore: time.Now().Add(5 * time.Minute)})
		emu.AddEvent(azureimds.Event{EventID: "preempt-3", EventType: "Preempt", Resources: []string{"spotpool_3"}, NotBefore: time.Now().Add(30 * time.Second)})

		waitCordoned(t, env, "azure-1", time.Now())
		waitGone(t, env, victims, time.Minute)
		testenv.Eventually(t, 30*time.Second, "the Preempt event to be acknowledged", func(context.Context) (bool, string, error) {
			acks := emu.Acks()
			return len(acks) == 1 && acks[0] == "preempt-3", fmt.Sprint(acks), nil
		})
		waitEventOn(t, env, "azure-1", interrupt.ReasonAcknowledged)
		if n := getNodeE2E(ctx, t, env, "azure-1"); n.Spec.Unschedulable != true {
			t.Error("azure-1 was uncordoned after its preemption")
		}
	})

	t.Run("AWS two-minute notice: drained without deleting pods when PDBs allow", func(t *testing.T) {
		const pool = "aws"
		env.CreateNodes(lab.NodeSpec{Name: "aws-1", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})
		createDeployment(ctx, t, env, pool, "web", 4, tu.CPU("100m"), tu.GracePeriod(2), tu.RequireNodeLabel(poolLabel, pool))
		pdb := tu.PDB("aws-web", "aws-web", tu.MaxUnavailable(1))
		if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForPodsRunning("default", "app=aws-web", 4, time.Minute)
		victims := podsOnNode(ctx, t, env, "aws-1")
		env.CreateNodes(lab.NodeSpec{Name: "aws-2", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})

		emu := awsimds.New(awsimds.Options{})
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		metrics := startAgent(t, env, "aws-1", "aws", srv.URL, "")
		testenv.Eventually(t, 30*time.Second, "the agent to poll instance-action", func(context.Context) (bool, string, error) {
			return emu.Requests("/latest/meta-data/spot/instance-action") > 0, "", nil
		})
		emu.SetInstanceAction("terminate", time.Now().Add(2*time.Minute))
		waitCordoned(t, env, "aws-1", time.Now())
		waitGone(t, env, victims, 2*time.Minute)
		body := scrapeAfterDrain(t, env, metrics)
		if v := metricValue(body, "spotter_agent_pods_deleted_total"); v != "0" {
			t.Errorf("%s pods deleted; with 2 minutes and a PDB that lets pods go one by one, all must be evicted", v)
		}
		if v := metricValue(body, "spotter_agent_pods_evicted_total"); v != "4" {
			t.Errorf("%s pods evicted, want 4", v)
		}
	})

	t.Run("AWS rebalance recommendation: the configured taint only, lifted when it ends", func(t *testing.T) {
		const pool = "rebalance"
		env.CreateNodes(lab.NodeSpec{Name: "rebalance-1", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})
		createDeployment(ctx, t, env, pool, "web", 2, tu.CPU("100m"), tu.GracePeriod(1), tu.RequireNodeLabel(poolLabel, pool))
		env.WaitForPodsRunning("default", "app=rebalance-web", 2, time.Minute)

		emu := awsimds.New(awsimds.Options{})
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		startAgent(t, env, "rebalance-1", "aws", srv.URL, "agent:\n  rebalanceAction: Taint\n")
		testenv.Eventually(t, 30*time.Second, "the agent to poll", func(context.Context) (bool, string, error) {
			return emu.Requests("/latest/meta-data/events/recommendations/rebalance") > 0, "", nil
		})
		emu.SetRebalance(time.Now())
		testenv.Eventually(t, 30*time.Second, "the PreferNoSchedule taint", func(ctx context.Context) (bool, string, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, "rebalance-1", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectPreferNoSchedule), fmt.Sprint(n.Spec.Taints), nil
		})
		// Three reads of the recommendation later: still only the taint.
		read := emu.Requests(awsimds.RebalancePath)
		testenv.Eventually(t, 30*time.Second, "three more reads of the recommendation", func(context.Context) (bool, string, error) {
			n := emu.Requests(awsimds.RebalancePath)
			return n >= read+3, fmt.Sprintf("%d reads, from %d", n, read), nil
		})
		n := getNodeE2E(ctx, t, env, "rebalance-1")
		if n.Spec.Unschedulable || hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectNoSchedule) {
			t.Errorf("a rebalance recommendation with action Taint cordoned the node: %v %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		if pods := podsOnNode(ctx, t, env, "rebalance-1"); len(pods) != 2 {
			t.Errorf("a rebalance recommendation with action Taint moved pods: %v", podNames(pods))
		}
		emu.ClearRebalance()
		testenv.Eventually(t, 30*time.Second, "the taint lifted once the recommendation is withdrawn", func(ctx context.Context) (bool, string, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, "rebalance-1", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			_, recorded := n.Annotations[interrupt.Annotation]
			return !hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectPreferNoSchedule) && !recorded, fmt.Sprint(n.Spec.Taints), nil
		})
	})

	t.Run("AWS scheduled maintenance with action Cordon: cordoned, uncordoned when canceled", func(t *testing.T) {
		env.CreateNodes(lab.NodeSpec{Name: "maint-1", Class: lab.ClassSpot})
		emu := awsimds.New(awsimds.Options{})
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		startAgent(t, env, "maint-1", "aws", srv.URL, "agent:\n  maintenanceAction: Cordon\n")
		testenv.Eventually(t, 30*time.Second, "the agent to poll", func(context.Context) (bool, string, error) {
			return emu.Requests("/latest/meta-data/events/maintenance/scheduled") > 0, "", nil
		})
		event := awsimds.ScheduledEvent{Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-0d59937288b749b32",
			NotBefore: time.Now().Add(48 * time.Hour), NotAfter: time.Now().Add(50 * time.Hour), State: "active"}
		emu.SetScheduledEvents(event)
		waitCordoned(t, env, "maint-1", time.Now())
		event.State = "canceled"
		emu.SetScheduledEvents(event)
		testenv.Eventually(t, 30*time.Second, "maint-1 uncordoned and untainted", func(ctx context.Context) (bool, string, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, "maint-1", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return !n.Spec.Unschedulable && !hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectNoSchedule), fmt.Sprint(n.Spec.Unschedulable, n.Spec.Taints), nil
		})
		waitEventOn(t, env, "maint-1", interrupt.ReasonEnded)
	})
}

// poolLabel keeps each subtest's pods on its own nodes.
const poolLabel = "e2e.spotter.dev/pool"

// startAgent runs spotter-agent for node against a metadata endpoint, with
// extra configuration, and returns its metrics address.
func startAgent(t *testing.T, env *testenv.Env, node, cloud, endpoint, extra string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics, health := testenv.FreeAddr(t), testenv.FreeAddr(t)
	testenv.StartAgent(t, "agent-"+node, "--node-name", node, "--kubeconfig", env.Kubeconfig, "--cloud", cloud,
		"--metadata-endpoint", endpoint, "--config", config, "--metrics-bind-address", metrics, "--health-probe-bind-address", health)
	// Ready once it has read every notice path of its metadata service.
	testenv.ScrapeContains(t, "http://"+health+"/readyz", "", "ok", 30*time.Second)
	return metrics
}

// waitCordoned waits until node carries the agent's NoSchedule taint and is
// cordoned, and returns how long after since that was first seen.
func waitCordoned(t *testing.T, env *testenv.Env, node string, since time.Time) time.Duration {
	t.Helper()
	var at time.Time
	testenv.Eventually(t, 30*time.Second, node+" tainted and cordoned", func(ctx context.Context) (bool, string, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		at = time.Now()
		return n.Spec.Unschedulable && hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectNoSchedule), fmt.Sprint(n.Spec.Taints), nil
	})
	return at.Sub(since)
}

// waitGone waits until every pod of pods is gone, matched by UID.
func waitGone(t *testing.T, env *testenv.Env, pods []corev1.Pod, timeout time.Duration) {
	t.Helper()
	uids := map[types.UID]string{}
	for _, p := range pods {
		uids[p.UID] = p.Name
	}
	testenv.Eventually(t, timeout, fmt.Sprintf("the %d pods to be gone", len(pods)), func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, p := range list.Items {
			if name, ok := uids[p.UID]; ok {
				left = append(left, name)
			}
		}
		return len(left) == 0, fmt.Sprintf("%d left: %v", len(left), left), nil
	})
}

// createDeployment creates the Deployment pool-name in "default".
func createDeployment(ctx context.Context, t *testing.T, env *testenv.Env, pool, name string, replicas int32, opts ...tu.PodOption) {
	t.Helper()
	d := tu.Deployment(pool+"-"+name, replicas, opts...)
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createDaemonSet runs a DaemonSet pod on every node of pool: the agent
// leaves it.
func createDaemonSet(ctx context.Context, t *testing.T, env *testenv.Env, pool string) {
	t.Helper()
	tmpl := tu.Pod("logs", tu.WithLabels("app", pool+"-logs"), tu.RequireNodeLabel(poolLabel, pool), tu.GracePeriod(1))
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-logs", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pool + "-logs"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
	ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	if _, err := env.Client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podsOnNode lists the non-DaemonSet pods bound to node.
func podsOnNode(ctx context.Context, t *testing.T, env *testenv.Env, node string) []corev1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); p.Spec.NodeName == node && (ref == nil || ref.Kind != "DaemonSet") {
			out = append(out, p)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func getNodeE2E(ctx context.Context, t *testing.T, env *testenv.Env, name string) *corev1.Node {
	t.Helper()
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaintEffect(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// scrape returns the body of the metrics served at addr (the agent's or the
// controller's: HTTPS, read with a token allowed to get /metrics).
func scrape(t *testing.T, env *testenv.Env, addr string) string {
	t.Helper()
	token := env.ServiceAccountToken("prometheus", true)
	var body string
	testenv.Eventually(t, 10*time.Second, "the metrics at "+addr, func(ctx context.Context) (bool, string, error) {
		code, b, err := testenv.Scrape(ctx, "https://"+addr+"/metrics", token)
		body = b
		return err == nil && code == http.StatusOK, fmt.Sprintf("HTTP %d", code), err
	})
	return body
}

// scrapeAfterDrain returns the agent's metrics once its termination drain has
// returned (the pods may be gone a moment before).
func scrapeAfterDrain(t *testing.T, env *testenv.Env, addr string) string {
	t.Helper()
	var body string
	testenv.Eventually(t, 30*time.Second, "the agent's drain to return", func(context.Context) (bool, string, error) {
		body = scrape(t, env, addr)
		return strings.Contains(body, `spotter_agent_drain_duration_seconds_count{kind="termination"} 1`), "", nil
	})
	return body
}

// metricValue returns the value of an unlabelled sample in a Prometheus text
// body, or "absent".
func metricValue(body, name string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return "absent"
	}
	if f, err := strconv.ParseFloat(m[1], 64); err == nil && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return m[1]
}

// waitCycles waits until the counter name (unlabelled) of the controller
// serving metrics at addr has grown by more from its value now: that many
// more cycles of a loop that counts its cycles in it. A check that nothing
// happened then holds over whole cycles, however long each one takes.
func waitCycles(t *testing.T, env *testenv.Env, addr, name string, more int) {
	t.Helper()
	count := func() (int, bool) {
		n, err := strconv.Atoi(metricValue(scrape(t, env, addr), name))
		return n, err == nil
	}
	start, ok := count()
	if !ok {
		t.Fatalf("the metrics at %s have no counter %s", addr, name)
	}
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d more cycles counted by %s", more, name), func(context.Context) (bool, string, error) {
		n, _ := count()
		return n >= start+more, fmt.Sprintf("%d, from %d", n, start), nil
	})
}
