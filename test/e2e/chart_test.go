package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

const (
	chartDir     = "../../charts/spotter"
	chartNS      = "spotter-system"
	chartRelease = "spotter"
)

// runHelm runs the helm command (built from Helm's Go module) against the lab.
func runHelm(t *testing.T, env *testenv.Env, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.Helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if env != nil {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+env.Kubeconfig)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The chart, installed with helm into the lab, runs what Spotter needs with
// the permissions it grants and no more: the real controller and agent run
// with tokens of the chart's ServiceAccounts, bound to the chart's own pods
// (kwok's), pass the rescheduler and agent scenarios, and the agent's token is
// refused anything on another node.
func TestChartIdentities(t *testing.T) {
	chartIdentities(t, testenv.StartLab(t))
}

// The same on the oldest Kubernetes minor the chart supports (1.32: the node
// claim of bound tokens is GA there), built by hack/kube-bin.sh --oldest.
func TestChartIdentitiesOldestKubernetes(t *testing.T) {
	env := testenv.StartOldestLab(t)
	v, err := env.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "32" {
		t.Fatalf("the oldest lab runs Kubernetes %s.%s, want 1.32", v.Major, v.Minor)
	}
	chartIdentities(t, env)
}

func chartIdentities(t *testing.T, env *testenv.Env) {
	ctx := testenv.Context(t, 8*time.Minute)
	env.CreateNodes(
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "4"},
		systemNode,
	)
	web := tu.Deployment("web", 4, tu.CPU("500m"), tu.GracePeriod(1), tu.Tolerate(dedicatedTaint.Key, dedicatedTaint.Value))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 4, time.Minute)

	installChart(t, env)
	// spot-1 is a pool of its own (a label, a dedicated taint that web
	// tolerates); spot-gpu's taint nothing of the test tolerates.
	env.CreateNodes(
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4", Labels: map[string]string{"example.com/pool": "web"}, Taints: []corev1.Taint{dedicatedTaint}},
		lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-gpu", Class: lab.ClassSpot, CPU: "4", Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
	)
	// The agent's DaemonSet runs on every spot node, tainted or not, and only there.
	testenv.Eventually(t, 2*time.Minute, "an agent pod on each spot node, none elsewhere", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Client.CoreV1().Pods(chartNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
		if err != nil {
			return false, "", err
		}
		var on []string
		for _, p := range pods.Items {
			on = append(on, p.Spec.NodeName)
		}
		slices.Sort(on)
		return strings.Join(on, ",") == "spot-1,spot-2,spot-gpu", strings.Join(on, ","), nil
	})
	agentPod := waitPod(ctx, t, env, "app.kubernetes.io/component=agent", func(p *corev1.Pod) bool { return p.Spec.NodeName == "spot-1" })

	config := chartConfig(ctx, t, env)
	controllerProc, metrics, controllerKC := startChartController(ctx, t, env)

	// The rescheduler, under the controller's identity, moves web to spot.
	testenv.Eventually(t, 3*time.Minute, "every web pod Running on a spot node", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		onSpot, where := 0, []string{}
		for _, p := range pods.Items {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
			if strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot++
			}
		}
		return onSpot == 4, strings.Join(where, " "), nil
	})
	// Its metrics endpoint authenticates scrapers with tokenreviews and
	// subjectaccessreviews, under the same identity.
	testenv.ScrapeContains(t, "https://"+metrics+"/metrics", env.ServiceAccountToken("prometheus", true), "spotter_", time.Minute)
	controller := kubeClient(t, controllerKC)
	if _, err := controller.CoreV1().Secrets(chartNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller's token listed Secrets: %v, want Forbidden", err)
	}

	// The agent, under the identity of its pod on spot-1.
	agentKC := env.TokenKubeconfig("agent", podToken(ctx, t, env, agentPod))
	agent := kubeClient(t, agentKC)
	t.Run("the agent's token is held to its node", func(t *testing.T) {
		label := func(n *corev1.Node) { n.Labels["e2e-touched"] = "true" }
		wantRefused(t, "change another node", updateNode(ctx, agent, "od-1", label), "may not change node od-1")
		_, err := agent.CoreV1().Nodes().Patch(ctx, "spot-1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
		wantRefused(t, "patch its node (updates only)", err, `cannot patch resource "nodes"`)
		other := podOn(ctx, t, env, "app=web", "spot-2")
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: other.Namespace, Labels: map[string]string{drain.EvictedByLabel: "agent"}}}
		wantRefused(t, "evict a pod on another node", agent.CoreV1().Pods(other.Namespace).EvictV1(ctx, eviction), "may not evict pod default/"+other.Name)
		eviction.Labels = nil
		wantRefused(t, "evict without the label", agent.CoreV1().Pods(other.Namespace).EvictV1(ctx, eviction), "must carry the label")
		wantRefused(t, "delete a pod on another node", agent.CoreV1().Pods(other.Namespace).Delete(ctx, other.Name, metav1.DeleteOptions{}), "may not delete pod default/"+other.Name)
	})
	t.Run("on its node the agent's token changes only the cordon and Spotter's marks", func(t *testing.T) {
		// What the agent does on a notice, and undoes when it ends.
		mark := func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: interrupt.TaintKey, Value: "e2e", Effect: corev1.TaintEffectPreferNoSchedule},
				corev1.Taint{Key: drain.DrainingTaintKey, Value: "agent", Effect: corev1.TaintEffectNoSchedule})
			n.Annotations[interrupt.Annotation] = "{}"
			n.Annotations[drain.DrainingAnnotation] = "{}"
		}
		unmark := func(n *corev1.Node) {
			n.Spec.Unschedulable = false
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == interrupt.TaintKey || x.Key == drain.DrainingTaintKey })
			delete(n.Annotations, interrupt.Annotation)
			delete(n.Annotations, drain.DrainingAnnotation)
		}
		if err := updateNode(ctx, agent, "spot-1", mark); err != nil {
			t.Errorf("cordon, taint and mark its node: %v", err)
		}
		if err := updateNode(ctx, agent, "spot-1", unmark); err != nil {
			t.Errorf("lift the cordon, taints and marks of its node: %v", err)
		}
		for _, tc := range []struct {
			what, message string
			change        func(*corev1.Node)
		}{
			{"add a label", "may not change the labels of node spot-1", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" }},
			{"remove a label", "may not change the labels of node spot-1", func(n *corev1.Node) { delete(n.Labels, "example.com/pool") }},
			{"remove a taint not Spotter's", "may change only the taints spotter.dev/interruption, spotter.dev/draining", func(n *corev1.Node) {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == dedicatedTaint.Key })
			}},
			{"add a taint not Spotter's", "may change only the taints", func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule})
			}},
			{"add a finalizer", "may not change the finalizers or owner references of node spot-1", func(n *corev1.Node) {
				n.Finalizers = append(n.Finalizers, "example.com/keep")
			}},
			{"add an annotation not Spotter's", "not example.com/note", func(n *corev1.Node) { n.Annotations["example.com/note"] = "x" }},
		} {
			wantRefused(t, tc.what, updateNode(ctx, agent, "spot-1", tc.change), tc.message)
		}
	})
	t.Run("nobody but the DaemonSet controller and kubelets makes an agent identity", func(t *testing.T) {
		account := agentPod.Spec.ServiceAccountName
		// A pod made by hand that runs as the agent on another node.
		forged := tu.Pod("forged-agent", tu.InNamespace(chartNS), tu.OnNode("od-1"))
		forged.Spec.ServiceAccountName = account
		_, err := env.Client.CoreV1().Pods(chartNS).Create(ctx, forged, metav1.CreateOptions{})
		wantRefused(t, "create a pod as the agent", err, "only the DaemonSet controller may create pods that run as spotter-agent's ServiceAccount")
		// A token bound to the agent pod of spot-1, asked for by the admin.
		_, err = requestToken(ctx, t, env, env.Client, account, &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: agentPod.Name, UID: agentPod.UID})
		wantRefused(t, "ask for a token bound to an agent pod as the admin", err, "only kubelets may request tokens of spotter-agent's ServiceAccount")
		// An unbound one, by the kubelet of a node the agent runs on.
		_, err = requestToken(ctx, t, env, kubelet(t, env, "spot-1"), account, nil)
		wantRefused(t, "ask for an unbound token as a kubelet", err, "must be bound to a pod")
		// A legacy token Secret carries no node: the own-node policy refuses it.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-legacy-token", Namespace: chartNS,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: account}}, Type: corev1.SecretTypeServiceAccountToken}
		if _, err := env.Client.CoreV1().Secrets(chartNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var legacy string
		testenv.Eventually(t, time.Minute, "the legacy token filled in", func(ctx context.Context) (bool, string, error) {
			s, err := env.Client.CoreV1().Secrets(chartNS).Get(ctx, secret.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			legacy = string(s.Data[corev1.ServiceAccountTokenKey])
			return legacy != "", "", nil
		})
		unbound := kubeClient(t, env.TokenKubeconfig("agent-legacy", legacy))
		wantRefused(t, "change its node with a token that names no node", updateNode(ctx, unbound, "spot-1", func(n *corev1.Node) { n.Spec.Unschedulable = true }), "names no node")
	})

	// A preemption notice: the agent empties spot-1 with the same token, its
	// evictions passing the policy that refused the ones above.
	victims := podsOnNode(ctx, t, env, "spot-1")
	emu := gcpmetadata.New(gcpmetadata.Options{})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	t.Cleanup(emu.Close)
	agentProc := testenv.StartAgent(t, "agent-spot-1", "--node-name", "spot-1", "--kubeconfig", agentKC, "--cloud", "gcp",
		"--metadata-endpoint", srv.URL, "--config", config, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	testenv.Eventually(t, 30*time.Second, "the agent to long-poll preempted", func(context.Context) (bool, string, error) {
		return emu.Waiting(gcpmetadata.PreemptedPath) > 0, "", nil
	})
	emu.SetPreempted(true)
	waitGone(t, env, victims, time.Minute)
	if n := getNodeE2E(ctx, t, env, "spot-1"); !n.Spec.Unschedulable {
		t.Error("spot-1 not cordoned after the notice")
	}

	assertNotRefused(t, controllerProc, agentProc)

	// Uninstall: nothing of the chart's is left, and spotter cleanup leaves no
	// mark of Spotter's on any node.
	agentProc.Stop()
	controllerProc.Stop()
	if out, err := runHelm(t, env, "uninstall", chartRelease, "--namespace", chartNS, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if out, err := exec.Command(testenv.SpotterBinary(t), "cleanup", "--kubeconfig", env.Kubeconfig).CombinedOutput(); err != nil {
		t.Fatalf("spotter cleanup: %v\n%s", err, out)
	}
	assertNoSpotterMarks(ctx, t, env)
	if roles, err := env.Client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + chartRelease}); err != nil || len(roles.Items) > 0 {
		t.Errorf("ClusterRoles left after uninstall: %d (%v)", len(roles.Items), err)
	}
	if vaps, err := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err != nil || len(vaps.Items) > 0 {
		t.Errorf("ValidatingAdmissionPolicies left after uninstall: %d (%v)", len(vaps.Items), err)
	}
}

// dedicatedTaint keeps spot-1 for the pods that tolerate it.
var dedicatedTaint = corev1.Taint{Key: "example.com/dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}

// updateNode reads node with client, changes it and updates it with client,
// as the agent does (a read-modify-update, never a patch), again on a conflict
// (kwok renews the node's status).
func updateNode(ctx context.Context, client kubernetes.Interface, node string, change func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		change(n)
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// systemNode is where the chart's controller pods go (testdata/chart/lab.yaml):
// the test's controller process authenticates with a token bound to one of
// them, which a drain would invalidate.
var systemNode = lab.NodeSpec{Name: "system-1", Class: lab.ClassOnDemand, CPU: "4", Labels: map[string]string{"e2e-pool": "system"},
	Taints: []corev1.Taint{{Key: "e2e-pool", Value: "system", Effect: corev1.TaintEffectNoSchedule}}}

// installChart installs the chart into the lab with testdata/chart/lab.yaml and
// the extra --set flags.
func installChart(t *testing.T, env *testenv.Env, set ...string) {
	t.Helper()
	args := []string{"install", chartRelease, chartDir, "--namespace", chartNS, "--create-namespace", "--values", "testdata/chart/lab.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if out, err := runHelm(t, env, args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
}

// startChartController runs the real controller with the chart's configuration
// and a token bound to one of the chart's controller pods, as the chart's
// Deployment would, and returns it and its metrics address.
func startChartController(ctx context.Context, t *testing.T, env *testenv.Env) (proc *testenv.Process, metrics, kubeconfig string) {
	t.Helper()
	pod := waitPod(ctx, t, env, "app.kubernetes.io/component=controller", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	kc := env.TokenKubeconfig("controller", podToken(ctx, t, env, pod))
	metrics = testenv.FreeAddr(t)
	proc = testenv.StartSpotterEnv(t, "controller", []string{"POD_NAMESPACE=" + chartNS, "NODE_NAME=" + pod.Spec.NodeName}, "controller",
		"--config", chartConfig(ctx, t, env), "--kubeconfig", kc, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0")
	return proc, metrics, kc
}

// assertNotRefused fails when a process logged a refusal of the apiserver (a
// refusal that is only logged, of an Event say, fails too).
func assertNotRefused(t *testing.T, procs ...*testenv.Process) {
	t.Helper()
	for _, p := range procs {
		if log, _ := os.ReadFile(p.Log); strings.Contains(string(log), "forbidden") {
			t.Errorf("a request of %s was refused:\n%s", p.Log, log)
		}
	}
}

// The migrator, under the chart's controller identity with the provider's
// rules (the kwok provider's here: it creates and deletes Nodes), replaces the
// on-demand nodes by spot ones and is refused nothing.
func TestChartMigratorIdentity(t *testing.T) {
	l := startMigratorLab(t, "", 1)
	ctx := testenv.Context(t, 5*time.Minute)
	l.env.CreateNodes(systemNode)
	installChart(t, l.env, "config.cloud.provider=kwok", "config.cloud.kwokConfigFile="+filepath.Join(l.dir, "groups.yaml"),
		"config.migrator.enabled=true", "config.migrator.schedule=@every 5s", "config.migrator.nodeReadyTimeout=20s",
		"config.rescheduler.enabled=false", "agent.enabled=false")
	controller, _, _ := startChartController(ctx, t, l.env)
	testenv.Eventually(t, 3*time.Minute, "every on-demand node gone and every pod Running on spot", func(ctx context.Context) (bool, string, error) {
		od := l.nodesOf(ctx, t, "od")
		where := podsByNode(ctx, t, l.env)
		return len(od) == 0 && strings.Count(where, "@spot-") == 6, fmt.Sprintf("%d on-demand nodes; %s", len(od), where), nil
	})
	waitEventReason(t, l.env, migrator.ReasonMigrated)
	assertNotRefused(t, controller)
}

// assertNoSpotterMarks fails when a node carries a key of Spotter's or is
// cordoned.
func assertNoSpotterMarks(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		var left []string
		for k := range n.Labels {
			if strings.HasPrefix(k, "spotter.dev/") || (k == "cluster.x-k8s.io/interruptible") {
				left = append(left, "label "+k)
			}
		}
		for k := range n.Annotations {
			if strings.HasPrefix(k, "spotter.dev/") {
				left = append(left, "annotation "+k)
			}
		}
		for _, x := range n.Spec.Taints {
			if strings.HasPrefix(x.Key, "spotter.dev/") {
				left = append(left, "taint "+x.Key)
			}
		}
		if n.Spec.Unschedulable {
			left = append(left, "cordon")
		}
		if len(left) > 0 {
			t.Errorf("node %s keeps %v after spotter cleanup", n.Name, left)
		}
	}
}

func wantRefused(t *testing.T, what string, err error, message string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want refused", what)
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), message) {
		t.Errorf("%s: %v, want refused with %q", what, err, message)
	}
}

func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

// podToken returns a token of pod's ServiceAccount bound to pod, asked for
// as the kubelet of the pod's node asks for the token it projects into the
// pod: it carries the pod's node. (The chart lets only kubelets ask for the
// agent's tokens.)
func podToken(ctx context.Context, t *testing.T, env *testenv.Env, pod *corev1.Pod) string {
	t.Helper()
	tr, err := requestToken(ctx, t, env, kubelet(t, env, pod.Spec.NodeName), pod.Spec.ServiceAccountName,
		&authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	if err != nil {
		t.Fatalf("a token of %s/%s for pod %s: %v", chartNS, pod.Spec.ServiceAccountName, pod.Name, err)
	}
	return tr
}

// requestToken asks client for a token of the ServiceAccount account of the
// chart's namespace, bound to bound (nil: unbound).
func requestToken(ctx context.Context, t *testing.T, env *testenv.Env, client kubernetes.Interface, account string, bound *authnv1.BoundObjectReference) (string, error) {
	t.Helper()
	tr, err := client.CoreV1().ServiceAccounts(chartNS).CreateToken(ctx, account, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600), BoundObjectRef: bound,
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// kubelet returns a client that acts as node's kubelet (user system:node:NODE
// of group system:nodes, whom the Node authorizer lets ask for the tokens of
// the pods bound to node), impersonated by the lab's admin.
func kubelet(t *testing.T, env *testenv.Env, node string) kubernetes.Interface {
	t.Helper()
	rc := rest.CopyConfig(env.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	return kubernetes.NewForConfigOrDie(rc)
}

// chartConfig writes the SpotterConfiguration of the chart's ConfigMap to a
// file and returns its path.
func chartConfig(ctx context.Context, t *testing.T, env *testenv.Env) string {
	t.Helper()
	cms, err := env.Client.CoreV1().ConfigMaps(chartNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + chartRelease})
	if err != nil || len(cms.Items) != 1 {
		t.Fatalf("the chart's ConfigMap: %d found (%v)", len(cms.Items), err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cms.Items[0].Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitPod(ctx context.Context, t *testing.T, env *testenv.Env, selector string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	testenv.Eventually(t, 2*time.Minute, "a pod "+selector, func(ctx context.Context) (bool, string, error) {
		pods, err := env.Client.CoreV1().Pods(chartNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			if ok(&pods.Items[i]) {
				found = &pods.Items[i]
				return true, "", nil
			}
		}
		return false, "", nil
	})
	return found
}

func podOn(ctx context.Context, t *testing.T, env *testenv.Env, selector, node string) *corev1.Pod {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node && pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no pod %s on %s", selector, node)
	return nil
}
