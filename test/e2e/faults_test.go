package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The fault tests run Spotter against the lab's apiserver through a
// fault-injecting proxy (testenv.FaultProxy) and assert three things each:
//
//  1. every drain completes or rolls back: the pods end on spot and no node
//     is left marked, tainted or cordoned by Spotter;
//  2. no PodDisruptionBudget is broken: a watch through the test's own,
//     unproxied client sees every pod change and never fewer healthy pods of
//     a budget than its desiredHealthy;
//  3. no tight retry loop: the proxy never sees more requests within one
//     second than a bound argued at maxRequestsPerSecond.

// maxRequestsPerSecond bounds what the controller sends, all verbs
// together, in any one-second window of a fault test. The drain's client is
// client-go's default (5 per second, burst 10, per API group: core and
// policy); the manager's cache sends a LIST and a WATCH per kind it reads
// (about ten) at start, after the apiserver's restart and after every cut
// watch; the Event recorder one request per Event. The controller in these
// tests peaks at 12 to 26 (the most after the restart, when every informer
// lists again); a loop that retries without a wait sends one request per
// round trip through the proxy, hundreds per second.
const maxRequestsPerSecond = 60

// The seed of every draw of the fault tests: which request gets a fault, and
// when the kill tests kill.
const faultSeed = 19

// A drain under 429s that carry Retry-After, on every verb: client-go waits
// as told and retries, the drain completes.
func TestFaultReschedulerTooManyRequests(t *testing.T) {
	runReschedulerFault(t, testenv.Faults{TooManyRequests: 0.3, RetryAfter: time.Second}, testenv.TooManyRequests)
}

// A drain under 500s and 503s (with Retry-After) on every verb: evictions,
// marks and reads fail now and then; a drain whose mark or rollback fails is
// found by the next cycle and resumed or rolled back.
func TestFaultReschedulerServerErrors(t *testing.T) {
	runReschedulerFault(t, testenv.Faults{InternalError: 0.15, Unavailable: 0.15, RetryAfter: time.Second}, testenv.InternalError, testenv.Unavailable)
}

// A drain under requests held for 5 s and then answered 504 Timeout, half of
// them after they took effect (the client does not know whether its eviction
// or its mark happened).
func TestFaultReschedulerTimeouts(t *testing.T) {
	runReschedulerFault(t, testenv.Faults{Hold: 0.1, HoldFor: 5 * time.Second,
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}, testenv.Hold, testenv.Hold)
}

// A drain while every watch is cut 3 s after it began: the controller's cache
// re-lists and re-watches all along.
func TestFaultReschedulerDroppedWatches(t *testing.T) {
	runReschedulerFault(t, testenv.Faults{WatchLifetime: 3 * time.Second})
}

// kube-apiserver restarted in the middle of a drain (down for 3 s): the drain
// completes, or fails and is rolled back and done again.
func TestFaultAPIServerRestartMidDrain(t *testing.T) {
	env := startFaultLab(t, 2)
	proxy := env.StartFaultProxy(faultSeed)
	budgets := watchBudgets(t, env)
	ctrl := startFaultController(t, env, proxy.Kubeconfig, "controller", "")

	testenv.Eventually(t, time.Minute, "the drain of od-1 to begin", func(ctx context.Context) (bool, string, error) {
		return len(spotterMarked(ctx, t, env)) > 0, "", nil
	})
	// A wave in: some pods moved, some not.
	testenv.Eventually(t, time.Minute, "a pod of od-1 to be evicted", func(ctx context.Context) (bool, string, error) {
		evicted, err := evictedFrom(ctx, env, "od-1")
		return evicted > 0, fmt.Sprintf("%d evicted", evicted), err
	})
	ctx := testenv.Context(t, 2*time.Minute)
	marked := spotterMarked(ctx, t, env)
	if len(marked) == 0 {
		t.Fatal("the drain of od-1 ended before the apiserver's restart: the test would not restart it mid-drain")
	}
	if err := env.RestartAPIServer(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted with %v marked", marked)

	waitAllOnSpot(t, env, 3*time.Minute)
	assertNoMarks(t, env)
	budgets.check(t)
	proxy.AssertRate(t, testenv.AllVerbs, maxRequestsPerSecond)
	logDrains(t, ctrl)
}

// The requests a drain cannot do without: a fault test makes sure its faults
// meet them.
const (
	evictRequest = "create pods/eviction"
	markRequest  = "update nodes"
)

// runReschedulerFault runs the rescheduler through the proxy with faults on
// from its start to the end of the drain, and asserts the three. With
// scheduled faults, the first eviction gets the first and the first node
// update (the drain's mark) the second, besides the drawn ones; without, the
// faults are cut watches, and the watches of pods and nodes must have been
// cut. Either way the test fails when the faults missed those requests.
func runReschedulerFault(t *testing.T, faults testenv.Faults, scheduled ...testenv.Fault) {
	env := startFaultLab(t, 1)
	proxy := env.StartFaultProxy(faultSeed)
	budgets := watchBudgets(t, env)
	must := []string{"watch pods", "watch nodes"}
	if len(scheduled) == 0 {
		// Cut watches only: from the start, so that the cache's first
		// watches of pods and nodes are cut too (a watch keeps the faults it
		// began with).
		proxy.SetFaults(faults)
	}
	ctrl := startFaultController(t, env, proxy.Kubeconfig, "controller", "")
	if len(scheduled) > 0 {
		// From the end of the set-up on: a failed discovery request during
		// it stops the process (see the report of #19), which a cluster
		// restarts and a test does not. Its cache's first LISTs and WATCHes
		// get the faults.
		waitLog(t, ctrl, "Starting Spotter")
		must = []string{evictRequest, markRequest}
		proxy.FailNextOn(evictRequest, scheduled[0])
		proxy.FailNextOn(markRequest, scheduled[len(scheduled)-1])
		proxy.SetFaults(faults)
	}

	waitAllOnSpot(t, env, 3*time.Minute)
	assertNoMarks(t, env)
	on := proxy.InjectedOn()
	proxy.SetFaults(testenv.Faults{})
	budgets.check(t)
	proxy.AssertRate(t, testenv.AllVerbs, maxRequestsPerSecond)
	assertFaultsMet(t, on, must...)
	logDrains(t, ctrl)
}

// assertFaultsMet fails the test unless faults met each of the requests (as
// testenv.RequestOf names them), and logs where they fell.
func assertFaultsMet(t *testing.T, on map[string]int, requests ...string) {
	t.Helper()
	for _, r := range requests {
		if on[r] == 0 {
			t.Errorf("no fault met %q: the test did not exercise what it is about", r)
		}
	}
	t.Logf("faults by request: %v", on)
}

// startFaultLab starts a lab with the on-demand node od-1 running two
// Deployments under budgets that let one pod go at a time (web: 6 replicas,
// maxUnavailable 1; api: 4 replicas, minAvailable 3), and two spot nodes with
// room for them: the rescheduler drains od-1 in six waves.
func startFaultLab(t *testing.T, grace int64) *testenv.Env {
	t.Helper()
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	env.CreateNodes(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "4"})
	createBudgeted(ctx, t, env, map[string]int32{"web": 6, "api": 4}, grace)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "4"})
	waitPDBsComputed(ctx, t, env)
	return env
}

// createBudgeted creates the Deployments web and api with the given replicas
// (100m CPU each, the grace period given), web under a budget maxUnavailable
// 1 and api minAvailable replicas-1, and waits until they run.
func createBudgeted(ctx context.Context, t *testing.T, env *testenv.Env, replicas map[string]int32, grace int64) {
	t.Helper()
	for app, n := range replicas {
		d := tu.Deployment(app, n, tu.CPU("100m"), tu.GracePeriod(grace))
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		opt := tu.MaxUnavailable(1)
		if app == "api" {
			opt = tu.MinAvailable(n - 1)
		}
		if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB(app, app, opt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for app, n := range replicas {
		env.WaitForPodsRunning("default", "app="+app, int(n), 2*time.Minute)
	}
}

// startFaultController runs `spotter controller` with the rescheduler on
// kubeconfig: cordoning drains, planning every 10 s, a failed node cooling
// down 5 s (the product's 10 m would outlast the test), and extra lines.
func startFaultController(t *testing.T, env *testenv.Env, kubeconfig, name, extra string) *testenv.Process {
	t.Helper()
	config := writeConfig(t, `drain:
  cordon: true
  maxEvictionBackoff: 5s
rescheduler:
  interval: 10s
  drainDelay: 0s
  replacementTimeout: 30s
  failureBackoff: 5s
  maxFailureBackoff: 10s
`+extra)
	return testenv.StartSpotter(t, name, "controller", "--config", config, "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// waitAllOnSpot waits until every pod of web and api is Running on a spot
// node, and none is elsewhere or terminating.
func waitAllOnSpot(t *testing.T, env *testenv.Env, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "every pod Running on a spot node", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app in (web,api)"})
		if err != nil {
			return false, "", err
		}
		off := 0
		for _, p := range list.Items {
			if !strings.HasPrefix(p.Spec.NodeName, "spot-") || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				off++
			}
		}
		return off == 0 && len(list.Items) > 0, podsByNode(ctx, t, env), nil
	})
}

// waitLog waits until the process's log holds msg.
func waitLog(t *testing.T, p *testenv.Process, msg string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%q in the log of %s", msg, filepath.Base(p.Log)), func(context.Context) (bool, string, error) {
		data, err := os.ReadFile(p.Log)
		return strings.Contains(string(data), msg), "", err
	})
}

// spotterMarked lists the nodes that carry a drain's mark or taint.
// evictedFrom counts the pods of web and api that have left node (or are
// leaving it): terminating there, or bound elsewhere.
func evictedFrom(ctx context.Context, env *testenv.Env, node string) (int, error) {
	list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app in (web,api)"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if (p.Spec.NodeName == node && p.DeletionTimestamp != nil) || (p.Spec.NodeName != "" && p.Spec.NodeName != node) {
			n++
		}
	}
	return n, nil
}

func spotterMarked(ctx context.Context, t *testing.T, env *testenv.Env) []string {
	t.Helper()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		_, marked, _ := drain.MarkOf(&n)
		if marked || hasTaintEffect(&n, drain.DrainingTaintKey, corev1.TaintEffectNoSchedule) {
			out = append(out, n.Name)
		}
	}
	return out
}

// logDrains logs what the controller's log says of its drains.
func logDrains(t *testing.T, procs ...*testenv.Process) {
	t.Helper()
	counts := map[string]int{}
	for _, p := range procs {
		data, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range []string{"Draining node", "Drained node", "Drain failed", "Rolled back an unfinished drain", "Resuming an unfinished drain"} {
			counts[msg] += strings.Count(string(data), `"msg":"`+msg)
		}
	}
	t.Logf("drains: %d started, %d succeeded, %d failed (and rolled back), %d unfinished rolled back, %d resumed",
		counts["Draining node"], counts["Drained node"], counts["Drain failed"], counts["Rolled back an unfinished drain"], counts["Resuming an unfinished drain"])
}

// budgetWatch follows every pod of "default" through the test's own client
// and, after each change, counts the healthy pods (Ready, not terminating,
// as the disruption controller counts them) of every PodDisruptionBudget.
type budgetWatch struct {
	mu        sync.Mutex
	budgets   []watchedBudget
	pods      map[types.UID]*corev1.Pod
	violation string // the first time a budget was broken
	armed     bool   // the initial list is in
	stop      chan struct{}
}

type watchedBudget struct {
	name     string
	selector labels.Selector
	// desired and expected are the budget's desiredHealthy and expectedPods
	// when the test began.
	desired, expected int32
	lowest            int32
}

// watchBudgets starts a budgetWatch over the budgets of "default", which
// must have their status computed (waitPDBsComputed).
func watchBudgets(t *testing.T, env *testenv.Env) *budgetWatch {
	t.Helper()
	ctx := testenv.Context(t, time.Minute)
	list, err := env.Client.PolicyV1().PodDisruptionBudgets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &budgetWatch{pods: map[types.UID]*corev1.Pod{}, stop: make(chan struct{})}
	for _, pdb := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		w.budgets = append(w.budgets, watchedBudget{name: pdb.Name, selector: sel, desired: pdb.Status.DesiredHealthy,
			expected: pdb.Status.ExpectedPods, lowest: pdb.Status.ExpectedPods})
	}
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(obj, false) },
		UpdateFunc: func(_, obj any) { w.update(obj, false) },
		DeleteFunc: func(obj any) { w.update(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the budget watch did not sync")
	}
	// The initial list arrives pod by pod: count from the whole of it.
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
	w.update(nil, false)
	t.Cleanup(func() { close(w.stop); factory.Shutdown() })
	return w
}

func (w *budgetWatch) update(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pod, ok := obj.(*corev1.Pod)
	switch {
	case ok && deleted:
		delete(w.pods, pod.UID)
	case ok:
		w.pods[pod.UID] = pod
	}
	if !w.armed {
		return
	}
	what := "the initial list"
	if ok {
		what = "a change of " + pod.Name
	}
	for i := range w.budgets {
		b := &w.budgets[i]
		healthy := int32(0)
		for _, p := range w.pods {
			if p.DeletionTimestamp == nil && podReady(*p) && b.selector.Matches(labels.Set(p.Labels)) {
				healthy++
			}
		}
		b.lowest = min(b.lowest, healthy)
		if healthy < b.desired && w.violation == "" {
			w.violation = fmt.Sprintf("%s had %d healthy pods at %s, its budget wants %d (after %s)",
				b.name, healthy, time.Now().Format("15:04:05.000"), b.desired, what)
		}
	}
}

// check fails the test if a budget was broken, or if no budget ever lost a
// pod (the watch then saw no drain).
func (w *budgetWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.violation != "" {
		t.Errorf("a PodDisruptionBudget was broken: %s", w.violation)
	}
	disrupted := false
	var lows []string
	for _, b := range w.budgets {
		lows = append(lows, fmt.Sprintf("%s lowest %d healthy (desired %d)", b.name, b.lowest, b.desired))
		disrupted = disrupted || b.lowest < b.expected
	}
	t.Logf("budgets: %s", strings.Join(lows, ", "))
	if !disrupted {
		t.Error("no budget ever lost a pod: the watch did not see the drains")
	}
}

// spotter-agent under faults: an AWS two-minute notice on a node whose six
// pods a budget lets go one at a time, with 429s, 500s and 503s on every
// verb. Every pod is evicted (none deleted) before the deadline, the budget
// holds, no other node is touched, and the agent sends no tight retry loop.
func TestFaultAgentDrain(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	const pool = "agent"
	env.CreateNodes(lab.NodeSpec{Name: "agent-1", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})
	createDeployment(ctx, t, env, pool, "web", 6, tu.CPU("100m"), tu.GracePeriod(2), tu.RequireNodeLabel(poolLabel, pool))
	pdb := tu.PDB("agent-web", "agent-web", tu.MaxUnavailable(1))
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=agent-web", 6, time.Minute)
	victims := podsOnNode(ctx, t, env, "agent-1")
	env.CreateNodes(lab.NodeSpec{Name: "agent-2", Class: lab.ClassSpot, Labels: map[string]string{poolLabel: pool}})
	waitPDBsComputed(ctx, t, env)
	budgets := watchBudgets(t, env)

	proxy := env.StartFaultProxy(faultSeed)
	emu := awsimds.New(awsimds.Options{})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	config := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics := testenv.FreeAddr(t)
	testenv.StartAgent(t, "agent", "--node-name", "agent-1", "--kubeconfig", proxy.Kubeconfig, "--cloud", "aws",
		"--metadata-endpoint", srv.URL, "--config", config, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0")
	testenv.Eventually(t, time.Minute, "the agent to poll instance-action", func(context.Context) (bool, string, error) {
		return emu.Requests("/latest/meta-data/spot/instance-action") > 0, "", nil
	})
	// Faults from now on: the agent's start (a read of its Node) is not
	// retried; a pod that failed to start is restarted by its DaemonSet.
	proxy.FailNextOn(evictRequest, testenv.TooManyRequests)
	proxy.FailNextOn(markRequest, testenv.Unavailable)
	proxy.SetFaults(testenv.Faults{TooManyRequests: 0.2, InternalError: 0.1, Unavailable: 0.1, RetryAfter: time.Second})
	proxy.ResetRates() // the start-up's reads are not the drain's

	notice := time.Now()
	deadline := notice.Add(2 * time.Minute)
	emu.SetInstanceAction("terminate", deadline)
	waitCordoned(t, env, "agent-1", notice)
	waitGone(t, env, victims, time.Until(deadline))
	t.Logf("all %d pods gone %s after the notice", len(victims), time.Since(notice).Round(100*time.Millisecond))
	on := proxy.InjectedOn()
	// The metrics are read through the agent's TokenReview: faults off.
	proxy.SetFaults(testenv.Faults{})
	body := scrapeAfterDrain(t, env, metrics)
	if v := metricValue(body, "spotter_agent_pods_deleted_total"); v != "0" {
		t.Errorf("%s pods deleted; with two minutes and a budget that lets pods go one by one, all must be evicted", v)
	}
	env.WaitForPodsRunning("default", "app=agent-web", 6, time.Minute)
	budgets.check(t)
	// The drained node stays marked: it is going away. No other is touched.
	for _, name := range spotterMarked(ctx, t, env) {
		if name != "agent-1" {
			t.Errorf("node %s marked by a drain of agent-1", name)
		}
	}
	if n := getNodeE2E(ctx, t, env, "agent-2"); n.Spec.Unschedulable {
		t.Error("agent-2 cordoned")
	}
	// A budget that lets one pod go at a time refuses the other five until
	// each replacement is Ready: what the agent retries. Bound: see
	// maxAgentEvictionsPerSecond.
	proxy.AssertRate(t, "create", maxAgentEvictionsPerSecond)
	proxy.AssertRate(t, testenv.AllVerbs, maxRequestsPerSecond)
	assertFaultsMet(t, on, evictRequest, markRequest)
}

// maxAgentEvictionsPerSecond bounds the agent's creates (evictions and
// Events) in any second of its drain of six pods under a budget that lets one
// go at a time: the five others are refused until each replacement is Ready,
// and deadline mode retries each refused pod every 200 ms (drain's
// deadlineRetry): at most 25 evictions a second, and fewer while client-go
// waits out a 429's Retry-After. Measured: 12. A loop without a wait sends
// one per round trip through the proxy, a hundred and more.
const maxAgentEvictionsPerSecond = 30

// Twenty kill -9 of the controller at random points of the rescheduler's
// drains (seeded), each followed by a restart: the new process resumes what
// it finds. At the end every pod runs on spot, no node is marked or
// cordoned, and no budget was broken.
func TestFaultKillNineMidDrain(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 10*time.Minute)
	env.CreateNodes(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "4"})
	// Twenty waves (ten web pods on each node, one at a time) of slow
	// terminations: the drains last longer than the twenty kills take.
	createBudgeted(ctx, t, env, map[string]int32{"web": 20, "api": 12}, 8)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-3", Class: lab.ClassSpot, CPU: "4"})
	waitPDBsComputed(ctx, t, env)
	budgets := watchBudgets(t, env)

	rng := rand.New(rand.NewPCG(faultSeed, 1))
	var procs []*testenv.Process
	midDrain := 0
	for i := range 20 {
		p := startFaultController(t, env, env.Kubeconfig, fmt.Sprintf("controller-%02d", i+1), "")
		procs = append(procs, p)
		delay := time.Second + time.Duration(rng.Int64N(int64(5*time.Second)))
		time.Sleep(delay)
		marked := spotterMarked(ctx, t, env)
		p.Kill()
		if len(marked) > 0 {
			midDrain++
		}
		t.Logf("kill %d, %s after the start: marked %v", i+1, delay.Round(time.Millisecond), marked)
	}
	if midDrain == 0 {
		t.Fatal("no kill fell in the middle of a drain")
	}
	procs = append(procs, startFaultController(t, env, env.Kubeconfig, "controller-final", ""))

	// An eviction cut short by a kill after the apiserver counted it in the
	// budget's disruptedPods, but before it deleted the pod, holds the budget
	// for the disruption controller's two minutes: room for that.
	waitAllOnSpot(t, env, 4*time.Minute)
	assertNoMarks(t, env)
	budgets.check(t)
	t.Logf("%d of 20 kills fell while a node was marked", midDrain)
	logDrains(t, procs...)
}

// Twenty kill -9 of the controller at random points of the migrator's
// replacements (seeded), each followed by a restart. At the end the three
// on-demand nodes are replaced by three spot nodes, no more, every pod runs,
// no node is marked, selected or cordoned, and the budget held.
func TestFaultKillNineMidMigration(t *testing.T) {
	// Slow terminations keep each drain going for a while: the three
	// replacements last about as long as the twenty kills take.
	l := startMigratorLab(t, "", 25)
	ctx := testenv.Context(t, 10*time.Minute)
	// The on-demand group is there; a restarted provider must not bring it
	// back to its initial size once nodes are migrated away.
	groups := filepath.Join(l.dir, "groups.yaml")
	data, err := os.ReadFile(groups)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(groups, []byte(strings.Replace(string(data), "  initialSize: 3\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	budgets := watchBudgets(t, l.env)

	rng := rand.New(rand.NewPCG(faultSeed, 2))
	midway := 0
	for i := range 20 {
		p := startKwokMigrator(t, l, fmt.Sprintf("controller-%02d", i+1))
		delay := 2*time.Second + time.Duration(rng.Int64N(int64(6*time.Second)))
		time.Sleep(delay)
		state, under := migrationState(ctx, t, l)
		p.Kill()
		if under {
			midway++
		}
		t.Logf("kill %d, %s after the start: %s", i+1, delay.Round(time.Millisecond), state)
	}
	if midway == 0 {
		t.Fatal("no kill fell in the middle of a replacement")
	}
	startKwokMigrator(t, l, "controller-final")

	testenv.Eventually(t, 4*time.Minute, "every on-demand node gone and every pod Running on spot", func(ctx context.Context) (bool, string, error) {
		od := l.nodesOf(ctx, t, "od")
		pods, err := l.env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		onSpot := 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot++
			}
		}
		return len(od) == 0 && onSpot == 6 && len(pods.Items) == 6, fmt.Sprintf("%d on-demand nodes; %s", len(od), podsByNode(ctx, t, l.env)), nil
	})
	assertNoMarks(t, l.env)
	nodes, err := l.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, selected := n.Labels[migrator.SelectedForDeletionLabel]; selected || hasTaintEffect(&n, migrator.ToBeDeletedTaint, corev1.TaintEffectNoSchedule) {
			t.Errorf("node %s left selected for deletion: labels %v taints %v", n.Name, n.Labels, n.Spec.Taints)
		}
	}
	// Each on-demand node's two pods need a spot node of their own (anti-
	// affinity, 3 of 4 CPU): three, and an extra one would be stranded.
	if spot := l.nodesOf(ctx, t, "spot"); len(spot) != 3 {
		var names []string
		for _, n := range spot {
			names = append(names, n.Name)
		}
		t.Errorf("%d spot nodes (%v), want the 3 the pods need: %s", len(spot), names, podsByNode(ctx, t, l.env))
	}
	budgets.check(t)
	t.Logf("%d of 20 kills fell in the middle of a replacement", midway)
}

// startKwokMigrator runs `spotter controller` with the migrator on the kwok
// provider, as migratorLab.start does, but running every 2 s: a process
// killed a few seconds after its start has begun a replacement.
func startKwokMigrator(t *testing.T, l *migratorLab, name string) *testenv.Process {
	t.Helper()
	config := writeConfig(t, fmt.Sprintf(`cloud:
  provider: kwok
  kwokConfigFile: %s
migrator:
  enabled: true
  schedule: "@every 2s"
  nodeReadyTimeout: 20s
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`, filepath.Join(l.dir, "groups.yaml")))
	return testenv.StartSpotter(t, name, "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// migrationState says what of a replacement is under way (on-demand nodes
// selected for deletion or marked, the nodes of each group), and whether one
// is: a node selected or marked, or more spot nodes than replaced on-demand
// nodes (capacity asked for a replacement not yet drained).
func migrationState(ctx context.Context, t *testing.T, l *migratorLab) (string, bool) {
	t.Helper()
	var selected []string
	od := l.nodesOf(ctx, t, "od")
	for _, n := range od {
		_, marked, _ := drain.MarkOf(&n)
		if _, s := n.Labels[migrator.SelectedForDeletionLabel]; s || marked {
			selected = append(selected, fmt.Sprintf("%s (marked %v, cordoned %v)", n.Name, marked, n.Spec.Unschedulable))
		}
	}
	spot := len(l.nodesOf(ctx, t, "spot"))
	return fmt.Sprintf("selected %v; %d on-demand, %d spot nodes", selected, len(od), spot), len(selected) > 0 || spot > 3-len(od)
}
