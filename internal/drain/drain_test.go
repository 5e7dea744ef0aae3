package drain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// One lab for all drain tests; each test uses its own nodes and namespace.
func TestDrain(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme.Scheme, "spotter-test")

	newDrainer := func(component string, opts drain.Options) *drain.Drainer {
		opts.Component = component
		if opts.Backoff == 0 {
			opts.Backoff, opts.MaxBackoff = 200*time.Millisecond, time.Second
		}
		opts.PollInterval = 200 * time.Millisecond
		return drain.New(env.Client, clock.RealClock{}, recorder, opts)
	}

	t.Run("evicts through PDB refusals and leaves the node clean", func(t *testing.T) {
		ns := namespace(ctx, t, env, "evict")
		env.CreateNodes(lab.NodeSpec{Name: "evict-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "web", 3, "evict-1", tu.GracePeriod(2))
		daemonSet(ctx, t, env, ns, "logs", "evict-1")
		createPDB(ctx, t, env, ns, tu.PDB("web", "web", tu.MaxUnavailable(1)))
		waitPDB(t, env, ns, "web", 1)
		before := podsOn(ctx, t, env, "evict-1")

		// Until another node exists, the first evicted pod's replacement stays
		// Pending and the PDB refuses the next evictions (429). The first refusal
		// creates somewhere for the pods to go.
		var retries atomic.Int32
		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 2 * time.Minute, OnEvictionRetry: func() {
			if retries.Add(1) == 1 {
				go func() {
					_ = lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: "evict-2", Class: lab.ClassSpot})
				}()
			}
		}})
		res, err := d.Drain(ctx, drain.Request{Node: "evict-1", Reason: "test"})
		if err != nil {
			t.Fatalf("drain: %v (%+v)", err, res)
		}
		if len(res.Evicted) != 3 || len(res.Deleted) != 0 || res.RolledBack {
			t.Errorf("result %+v, want 3 evicted", res)
		}
		if retries.Load() == 0 {
			t.Error("a PDB with maxUnavailable 1 over 3 pods must have refused evictions (429)")
		}
		after := podsOn(ctx, t, env, "evict-1")
		if len(after) != 1 || !strings.HasPrefix(after[0].Name, "logs-") {
			t.Errorf("after the drain evict-1 runs %v, want only the DaemonSet pod", names(after))
		}
		for _, p := range before {
			if strings.HasPrefix(p.Name, "web-") {
				if _, err := env.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
					t.Errorf("evicted pod %s still exists", p.Name)
				}
			}
		}
		node := getNode(ctx, t, env, "evict-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("node left with marks: annotations %v taints %v unschedulable %v", node.Annotations, node.Spec.Taints, node.Spec.Unschedulable)
		}
		waitEvent(t, env, "default", "evict-1", drain.ReasonDrainSucceeded)
		waitEvent(t, env, ns, "", drain.ReasonEvicted)
	})

	t.Run("drains in waves, each once the budget allows it", func(t *testing.T) {
		ns := namespace(ctx, t, env, "waves")
		env.CreateNodes(lab.NodeSpec{Name: "waves-1", Class: lab.ClassOnDemand}, lab.NodeSpec{Name: "waves-2", Class: lab.ClassSpot})
		deploy(ctx, t, env, ns, "web", 3, "waves-1", tu.GracePeriod(1))
		deploy(ctx, t, env, ns, "free", 1, "waves-1")
		createPDB(ctx, t, env, ns, tu.PDB("web", "web", tu.MaxUnavailable(1)))
		waitPDB(t, env, ns, "web", 1)
		// The plan's waves: one web pod each; the free pod is not listed (it
		// came after the plan) and goes in the last wave.
		waves := map[string]int{}
		for _, p := range podsOn(ctx, t, env, "waves-1") {
			if strings.HasPrefix(p.Name, "web-") {
				waves[ns+"/"+p.Name] = len(waves) + 1
			}
		}
		var retries atomic.Int32
		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 2 * time.Minute, OnEvictionRetry: func() { retries.Add(1) }})
		res, err := d.Drain(ctx, drain.Request{Node: "waves-1", Reason: "test", Waves: waves})
		if err != nil {
			t.Fatalf("drain: %v (%+v)", err, res)
		}
		if len(res.Evicted) != 4 || res.RolledBack {
			t.Errorf("result %+v, want 4 evicted", res)
		}
		// Each wave waited until the budget allowed it: the Eviction API never
		// had to refuse one.
		if n := retries.Load(); n != 0 {
			t.Errorf("%d evictions refused by the PodDisruptionBudget; a wave must start only once the budget allows it", n)
		}
		if after := podsOn(ctx, t, env, "waves-1"); len(after) != 0 {
			t.Errorf("waves-1 still runs %v", names(after))
		}
		waitEvent(t, env, "default", "waves-1", drain.ReasonDrainWave)
		waitEvent(t, env, "default", "waves-1", drain.ReasonDrainSucceeded)
	})

	t.Run("evicts the pods it displaces from other nodes first, leaving their nodes unmarked", func(t *testing.T) {
		ns := namespace(ctx, t, env, "displace")
		env.CreateNodes(lab.NodeSpec{Name: "displace-1", Class: lab.ClassOnDemand}, lab.NodeSpec{Name: "displace-2", Class: lab.ClassOnDemand},
			lab.NodeSpec{Name: "displace-spot", Class: lab.ClassSpot})
		deploy(ctx, t, env, ns, "db", 1, "displace-1", tu.GracePeriod(1))
		deploy(ctx, t, env, ns, "cache", 2, "displace-2", tu.GracePeriod(1))
		cache := podsOn(ctx, t, env, "displace-2")
		db := podsOn(ctx, t, env, "displace-1")[0]
		displaced := map[string]string{
			ns + "/" + cache[0].Name: "displace-2",
			ns + "/gone":             "displace-2", // deleted since the plan
			ns + "/" + cache[1].Name: "displace-3", // moved since the plan
		}
		waves := map[string]int{ns + "/" + cache[0].Name: 1, ns + "/" + db.Name: 2}
		var mu sync.Mutex
		var order []string
		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 2 * time.Minute})
		res, err := d.Drain(ctx, drain.Request{Node: "displace-1", Reason: "test", Waves: waves, Displaced: displaced,
			BeforeEvict: func(_ context.Context, p *corev1.Pod) error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, p.Name)
				return nil
			}})
		if err != nil {
			t.Fatalf("drain: %v (%+v)", err, res)
		}
		if want := []string{cache[0].Name, db.Name}; !slices.Equal(order, want) {
			t.Errorf("evicted in the order %v, want %v", order, want)
		}
		if len(res.Evicted) != 2 {
			t.Errorf("result %+v, want 2 evicted", res)
		}
		// Of the pods displace-2 ran, only the displaced one left (the
		// scheduler may put replacements there).
		var left []string
		for _, p := range podsOn(ctx, t, env, "displace-2") {
			if p.Name == cache[0].Name || p.Name == cache[1].Name {
				left = append(left, p.Name)
			}
		}
		if !slices.Equal(left, []string{cache[1].Name}) {
			t.Errorf("of its pods, displace-2 runs %v, want only %s", left, cache[1].Name)
		}
		if n := getNode(ctx, t, env, "displace-2"); n.Spec.Unschedulable || hasTaint(n, drain.DrainingTaintKey) {
			t.Errorf("displace-2 was marked: %+v", n.Spec)
		}
		waitEvent(t, env, ns, cache[0].Name, drain.ReasonEvicted)
	})

	t.Run("holds an eviction while a pod under the same budget is on a node under notice", func(t *testing.T) {
		ns := namespace(ctx, t, env, "notice")
		env.CreateNodes(lab.NodeSpec{Name: "notice-od", Class: lab.ClassOnDemand}, lab.NodeSpec{Name: "notice-spot", Class: lab.ClassSpot},
			lab.NodeSpec{Name: "notice-spot-2", Class: lab.ClassSpot})
		deploy(ctx, t, env, ns, "web", 2, "notice-od", tu.GracePeriod(1))
		// A pod of the same budget on the node the notice is for, as the
		// agent finds it before its own eviction.
		sibling := tu.Pod("sibling", tu.WithLabels("app", "web"), tu.OnNode("notice-spot"), tu.CPU("100m"))
		sibling.Namespace = ns
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, sibling, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForPodsRunning(ns, "app=web", 3, time.Minute)
		createPDB(ctx, t, env, ns, tu.PDB("web", "web", tu.MinAvailable(1)))
		waitPDB(t, env, ns, "web", 2)
		spot := getNode(ctx, t, env, "notice-spot")
		spot.Spec.Taints = append(spot.Spec.Taints, corev1.Taint{Key: interrupt.TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule})
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, spot, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The rescheduler's hook, reading the cluster for each question.
		hold := plan.New(plan.Options{}).NewResident(func(ctx context.Context) (*snapshot.Snapshot, error) {
			return snapshot.FromCluster(ctx, env.Client)
		}).HoldForNotices()
		var held, counted atomic.Int32
		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 2 * time.Minute, OnEvictionHeld: func() { counted.Add(1) }})
		done := make(chan error, 1)
		go func() {
			_, err := d.Drain(ctx, drain.Request{Node: "notice-od", Reason: "test", BeforeEvict: func(ctx context.Context, p *corev1.Pod) error {
				err := hold(ctx, p)
				if errors.Is(err, drain.ErrNotNow) {
					held.Add(1)
				}
				return err
			}})
			done <- err
		}()
		testenv.Eventually(t, 30*time.Second, "the evictions held", func(context.Context) (bool, string, error) {
			return held.Load() >= 4, fmt.Sprint(held.Load(), " holds"), nil
		})
		for _, p := range podsOn(ctx, t, env, "notice-od") {
			if p.DeletionTimestamp != nil {
				t.Fatalf("%s evicted while a pod of its budget was on a node under notice", p.Name)
			}
		}
		// The agent evicts the sibling: the drain goes on.
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "sibling", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("drain after the hold: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the drain did not end after the hold")
		}
		var left []string
		for _, p := range podsOn(ctx, t, env, "notice-od") {
			if p.Labels["app"] == "web" {
				left = append(left, p.Name)
			}
		}
		if len(left) > 0 {
			t.Errorf("pods of web still on notice-od after the drain: %v", left)
		}
		// Each hold is counted once (the controllers' metric).
		if counted.Load() != held.Load() {
			t.Errorf("OnEvictionHeld called %d times for %d holds", counted.Load(), held.Load())
		}
	})

	t.Run("a wave whose replacements never come is rolled back", func(t *testing.T) {
		ns := namespace(ctx, t, env, "stuck")
		env.CreateNodes(lab.NodeSpec{Name: "stuck-1", Class: lab.ClassOnDemand})
		// Replacements need a node label no node has: they stay Pending.
		deploy(ctx, t, env, ns, "web", 2, "stuck-1", tu.GracePeriod(1), tu.RequireNodeLabel("spotter.dev/test", "nowhere"))
		createPDB(ctx, t, env, ns, tu.PDB("web", "web", tu.MaxUnavailable(1)))
		waitPDB(t, env, ns, "web", 1)
		before := podsOn(ctx, t, env, "stuck-1")
		waves := map[string]int{ns + "/" + before[0].Name: 1, ns + "/" + before[1].Name: 2}

		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 5 * time.Second})
		res, err := d.Drain(ctx, drain.Request{Node: "stuck-1", Reason: "test", Waves: waves})
		if err == nil || !res.RolledBack {
			t.Fatalf("drain succeeded or was not rolled back: %v %+v", err, res)
		}
		if len(res.Evicted) != 1 || res.Evicted[0] != ns+"/"+before[0].Name {
			t.Errorf("evicted %v, want only wave 1 (%s)", res.Evicted, before[0].Name)
		}
		want := "wave 2 of 2 not started: PodDisruptionBudget " + ns + "/web allows 0 disruption(s), the wave needs 1 (the replacements of the pods evicted so far are not Ready)"
		if len(res.Blocked) != 1 || res.Blocked[0].Pod != ns+"/"+before[1].Name || !strings.HasPrefix(res.Blocked[0].Reason, want) {
			t.Errorf("blocked %+v\nwant %s: %s", res.Blocked, before[1].Name, want)
		}
		node := getNode(ctx, t, env, "stuck-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("rollback left marks: annotations %v taints %v unschedulable %v", node.Annotations, node.Spec.Taints, node.Spec.Unschedulable)
		}
		if pods := podsOn(ctx, t, env, "stuck-1"); len(pods) != 1 || pods[0].Name != before[1].Name {
			t.Errorf("the second wave's pod must still run on stuck-1: %v", names(pods))
		}
		waitEvent(t, env, "default", "stuck-1", drain.ReasonDrainRolledBack)
	})

	t.Run("rolls back when a PDB never allows the eviction", func(t *testing.T) {
		ns := namespace(ctx, t, env, "blocked")
		env.CreateNodes(lab.NodeSpec{Name: "blocked-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "db", 1, "blocked-1")
		createPDB(ctx, t, env, ns, tu.PDB("db", "db", tu.MinAvailable(1)))
		waitPDB(t, env, ns, "db", 0)

		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 3 * time.Second})
		res, err := d.Drain(ctx, drain.Request{Node: "blocked-1", Reason: "test"})
		if err == nil || !res.RolledBack {
			t.Fatalf("drain succeeded or was not rolled back: %v %+v", err, res)
		}
		if len(res.Blocked) != 1 || !strings.HasPrefix(res.Blocked[0].Pod, ns+"/db-") || !strings.Contains(res.Blocked[0].Reason, "disruption budget") {
			t.Errorf("blocked %+v, want the db pod and its PDB refusal", res.Blocked)
		}
		if !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "blocked by "+ns+"/db-") {
			t.Errorf("error %q should say it timed out and which pod blocked", err)
		}
		node := getNode(ctx, t, env, "blocked-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("rollback left marks: annotations %v taints %v unschedulable %v", node.Annotations, node.Spec.Taints, node.Spec.Unschedulable)
		}
		if pods := podsOn(ctx, t, env, "blocked-1"); len(pods) != 1 {
			t.Errorf("the protected pod must still run: %v", names(pods))
		}
		waitEvent(t, env, "default", "blocked-1", drain.ReasonDrainRolledBack)
	})

	t.Run("when time runs out, only the pods still terminating are named", func(t *testing.T) {
		ns := namespace(ctx, t, env, "held")
		env.CreateNodes(lab.NodeSpec{Name: "held-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "a-held", 1, "held-1", tu.GracePeriod(1))
		deploy(ctx, t, env, ns, "b-quick", 2, "held-1", tu.GracePeriod(1))
		// A finalizer keeps the first pod terminating. The drain waits for
		// the pods in the order it evicted them (by name, one at a time), so
		// its rounds of reads stop at that pod and never reach the others
		// before time runs out.
		held := podsOn(ctx, t, env, "held-1")[0]
		if !strings.HasPrefix(held.Name, "a-held-") {
			t.Fatalf("first pod %s, want a-held-*", held.Name)
		}
		finalizer := []byte(`{"metadata":{"finalizers":["spotter.dev/test-hold"]}}`)
		if _, err := env.Client.CoreV1().Pods(ns).Patch(ctx, held.Name, types.MergePatchType, finalizer, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			release := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := env.Client.CoreV1().Pods(ns).Patch(ctx, held.Name, types.MergePatchType, release, metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}()
		d := newDrainer("rescheduler", drain.Options{Cordon: true, Timeout: 4 * time.Second, MaxConcurrentEvictions: 1})
		res, err := d.Drain(ctx, drain.Request{Node: "held-1", Reason: "test"})
		if err == nil || !res.RolledBack {
			t.Fatalf("drain succeeded or was not rolled back: %v %+v", err, res)
		}
		if len(res.Evicted) != 3 {
			t.Errorf("evicted %v, want all 3 pods", res.Evicted)
		}
		want := []drain.Blocked{{Pod: ns + "/" + held.Name, Reason: "still terminating when time ran out"}}
		if !slices.Equal(res.Blocked, want) {
			t.Errorf("blocked %+v, want %+v", res.Blocked, want)
		}
	})

	t.Run("a PDB-blocked drain times out on the injected clock", func(t *testing.T) {
		ns := namespace(ctx, t, env, "clock")
		env.CreateNodes(lab.NodeSpec{Name: "clock-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "db", 1, "clock-1")
		createPDB(ctx, t, env, ns, tu.PDB("db", "db", tu.MinAvailable(1)))
		waitPDB(t, env, ns, "db", 0)

		start := time.Now()
		clk := testingclock.NewFakeClock(start)
		d := drain.New(env.Client, clk, recorder, drain.Options{Component: "rescheduler", Cordon: true, Timeout: 10 * time.Minute,
			Backoff: time.Second, MaxBackoff: 8 * time.Second})
		var res *drain.Result
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			res, err = d.Drain(ctx, drain.Request{Node: "clock-1", Reason: "test"})
		}()
		// Ten minutes of the fake clock pass in as many steps as the drain
		// retries, while the real API server refuses each eviction.
		end := drive(t, clk, done, 2, start.Add(11*time.Minute))
		if end.Before(start.Add(10 * time.Minute)) {
			t.Fatalf("the drain ended %s into its 10m timeout: %v", end.Sub(start), err)
		}
		if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "blocked by "+ns+"/db-") || !res.RolledBack {
			t.Fatalf("got %v (%+v), want a timeout blocked by the db pod, rolled back", err, res)
		}
		node := getNode(ctx, t, env, "clock-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("rollback left marks: annotations %v taints %v unschedulable %v", node.Annotations, node.Spec.Taints, node.Spec.Unschedulable)
		}
	})

	t.Run("a node drained by another component is refused", func(t *testing.T) {
		env.CreateNodes(lab.NodeSpec{Name: "other-1", Class: lab.ClassOnDemand})
		migrator := newDrainer("migrator", drain.Options{})
		// The migrator's drain of an empty node, keeping its marks, as before a delete.
		if _, err := migrator.Drain(ctx, drain.Request{Node: "other-1", Reason: "replace", KeepMarks: true}); err != nil {
			t.Fatal(err)
		}
		_, err := newDrainer("rescheduler", drain.Options{}).Drain(ctx, drain.Request{Node: "other-1", Reason: "test"})
		if !errors.Is(err, drain.ErrDrainedByOther) || !strings.Contains(err.Error(), "migrator") {
			t.Errorf("got %v, want ErrDrainedByOther naming the migrator", err)
		}
		m, marked, err := drain.MarkOf(getNode(ctx, t, env, "other-1"))
		if err != nil || !marked || m.By != "migrator" || m.Reason != "replace" {
			t.Errorf("the migrator's mark must stay: %+v %v %v", m, marked, err)
		}
	})

	t.Run("deadline mode deletes what a PDB keeps past its share of the time", func(t *testing.T) {
		ns := namespace(ctx, t, env, "deadline")
		env.CreateNodes(lab.NodeSpec{Name: "deadline-1", Class: lab.ClassSpot})
		deploy(ctx, t, env, ns, "db", 1, "deadline-1", tu.GracePeriod(30))
		deploy(ctx, t, env, ns, "dns", 1, "deadline-1", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" })
		createPDB(ctx, t, env, ns, tu.PDB("db", "db", tu.MinAvailable(1)))
		waitPDB(t, env, ns, "db", 0)

		d := newDrainer("agent", drain.Options{Cordon: true})
		deadline := time.Now().Add(8 * time.Second)
		res, err := d.Drain(ctx, drain.Request{Node: "deadline-1", Reason: "preempted", Deadline: deadline, KeepMarks: true})
		if err != nil {
			t.Fatalf("drain: %v (%+v)", err, res)
		}
		if time.Now().After(deadline) {
			t.Errorf("drain finished %s after its deadline", time.Since(deadline))
		}
		if len(res.Deleted) != 1 || !strings.HasPrefix(res.Deleted[0], ns+"/db-") {
			t.Errorf("deleted %v, want the PDB-protected db pod", res.Deleted)
		}
		if len(res.Evicted) != 1 || !strings.HasPrefix(res.Evicted[0], ns+"/dns-") {
			t.Errorf("evicted %v, want the critical dns pod", res.Evicted)
		}
		node := getNode(ctx, t, env, "deadline-1")
		if !hasTaint(node, drain.DrainingTaintKey) || !node.Spec.Unschedulable {
			t.Error("KeepMarks: the node must stay tainted and cordoned")
		}
	})

	t.Run("recover resumes or rolls back its own unfinished drains", func(t *testing.T) {
		ns := namespace(ctx, t, env, "recover")
		env.CreateNodes(lab.NodeSpec{Name: "recover-1", Class: lab.ClassOnDemand}, lab.NodeSpec{Name: "recover-2", Class: lab.ClassOnDemand},
			lab.NodeSpec{Name: "recover-other", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "web", 1, "recover-1", tu.GracePeriod(1))
		// Marks as a process killed mid-drain leaves them: the empty nodes' drains
		// keep their marks, recover-1's is a drain of a node that still has a pod.
		rescheduler := newDrainer("rescheduler", drain.Options{Cordon: true})
		for _, n := range []string{"recover-2"} {
			if _, err := rescheduler.Drain(ctx, drain.Request{Node: n, Reason: "interrupted", KeepMarks: true}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := newDrainer("migrator", drain.Options{}).Drain(ctx, drain.Request{Node: "recover-other", Reason: "replace", KeepMarks: true}); err != nil {
			t.Fatal(err)
		}
		markLikeACrash(ctx, t, env, "recover-1", "rescheduler")
		env.CreateNodes(lab.NodeSpec{Name: "recover-spot", Class: lab.ClassSpot})

		handled, err := rescheduler.Recover(ctx, drain.Resume)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(handled, ",") != "recover-1,recover-2" {
			t.Errorf("recovered %v, want the rescheduler's two nodes only", handled)
		}
		if pods := podsOn(ctx, t, env, "recover-1"); len(pods) != 0 {
			t.Errorf("resumed drain left %v", names(pods))
		}
		for _, n := range []string{"recover-1", "recover-2"} {
			if _, marked, _ := drain.MarkOf(getNode(ctx, t, env, n)); marked {
				t.Errorf("%s still marked after the resumed drain", n)
			}
		}
		if _, marked, _ := drain.MarkOf(getNode(ctx, t, env, "recover-other")); !marked {
			t.Error("the migrator's mark was touched")
		}

		// A rollback leaves the pods where they are: with pods on the node, a
		// resume (which evicts them, then unmarks) cannot pass for one.
		deploy(ctx, t, env, ns, "db", 2, "recover-2", tu.GracePeriod(1))
		markLikeACrash(ctx, t, env, "recover-2", "rescheduler")
		handled, err = rescheduler.Recover(ctx, drain.Rollback)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(handled, ",") != "recover-2" {
			t.Errorf("rolled back %v, want recover-2 only", handled)
		}
		if pods := podsOn(ctx, t, env, "recover-2"); len(pods) != 2 {
			t.Errorf("rollback left %v on recover-2, want its 2 db pods untouched", names(pods))
		}
		node := getNode(ctx, t, env, "recover-2")
		if _, marked, _ := drain.MarkOf(node); marked || node.Spec.Unschedulable || hasTaint(node, drain.DrainingTaintKey) {
			t.Errorf("rollback left marks on recover-2: %v %v", node.Spec.Taints, node.Spec.Unschedulable)
		}
	})

	t.Run("a shutdown lets a drain finish within the grace period", func(t *testing.T) {
		ns := namespace(ctx, t, env, "graceful")
		env.CreateNodes(lab.NodeSpec{Name: "graceful-1", Class: lab.ClassOnDemand}, lab.NodeSpec{Name: "graceful-spot", Class: lab.ClassSpot})
		deploy(ctx, t, env, ns, "web", 3, "graceful-1", tu.GracePeriod(1))
		process, stop := context.WithCancel(ctx)
		defer stop()
		dctx, cancel := drain.Outlive(process, clock.RealClock{}, time.Minute)
		defer cancel()
		// SIGTERM arrives as the first pod is about to be evicted.
		res, err := newDrainer("rescheduler", drain.Options{Cordon: true}).Drain(dctx, drain.Request{Node: "graceful-1", Reason: "test",
			BeforeEvict: func(context.Context, *corev1.Pod) error { stop(); return nil }})
		if err != nil || len(res.Evicted) != 3 {
			t.Fatalf("drain: %v (%+v), want 3 pods evicted after the shutdown began", err, res)
		}
		node := getNode(ctx, t, env, "graceful-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("node left with marks: taints %v unschedulable %v", node.Spec.Taints, node.Spec.Unschedulable)
		}
	})

	t.Run("a shutdown rolls back a drain that cannot finish within the grace period", func(t *testing.T) {
		ns := namespace(ctx, t, env, "shutdown")
		env.CreateNodes(lab.NodeSpec{Name: "shutdown-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "db", 1, "shutdown-1")
		createPDB(ctx, t, env, ns, tu.PDB("db", "db", tu.MinAvailable(1)))
		waitPDB(t, env, ns, "db", 0)
		process, stop := context.WithCancel(ctx)
		defer stop()
		dctx, cancel := drain.Outlive(process, clock.RealClock{}, 2*time.Second)
		defer cancel()
		res, err := newDrainer("rescheduler", drain.Options{Cordon: true}).Drain(dctx, drain.Request{Node: "shutdown-1", Reason: "test",
			BeforeEvict: func(context.Context, *corev1.Pod) error { stop(); return nil }})
		if !errors.Is(err, drain.ErrShutdown) || !res.RolledBack {
			t.Fatalf("got %v (%+v), want ErrShutdown and a rollback", err, res)
		}
		node := getNode(ctx, t, env, "shutdown-1")
		if _, marked, _ := drain.MarkOf(node); marked || hasTaint(node, drain.DrainingTaintKey) || node.Spec.Unschedulable {
			t.Errorf("rollback left marks: taints %v unschedulable %v", node.Spec.Taints, node.Spec.Unschedulable)
		}
		if pods := podsOn(ctx, t, env, "shutdown-1"); len(pods) != 1 {
			t.Errorf("the protected pod must still run: %v", names(pods))
		}
	})

	t.Run("dry run changes nothing", func(t *testing.T) {
		ns := namespace(ctx, t, env, "dry")
		env.CreateNodes(lab.NodeSpec{Name: "dry-1", Class: lab.ClassOnDemand})
		deploy(ctx, t, env, ns, "web", 2, "dry-1")
		res, err := newDrainer("rescheduler", drain.Options{Cordon: true, DryRun: true}).Drain(ctx, drain.Request{Node: "dry-1", Reason: "test"})
		if err != nil || len(res.Evicted) != 0 {
			t.Fatalf("dry run: %v %+v", err, res)
		}
		node := getNode(ctx, t, env, "dry-1")
		if _, marked, _ := drain.MarkOf(node); marked || node.Spec.Unschedulable || hasTaint(node, drain.DrainingTaintKey) {
			t.Error("dry run marked the node")
		}
		if pods := podsOn(ctx, t, env, "dry-1"); len(pods) != 2 {
			t.Errorf("dry run evicted pods: %v", names(pods))
		}
		waitEvent(t, env, "default", "dry-1", drain.ReasonWouldDrain)
	})
}

func namespace(ctx context.Context, t *testing.T, env *testenv.Env, name string) string {
	t.Helper()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "service account in "+name, func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, "", nil
	})
	return name
}

// deploy creates a Deployment whose pods are pinned (by hostname) to start on
// node, then unpins the template so replacements may go anywhere; it waits
// until its pods run.
func deploy(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string, replicas int32, node string, opts ...tu.PodOption) {
	t.Helper()
	dep := tu.Deployment(name, replicas, append(opts, tu.CPU("100m"))...)
	dep.Namespace = ns
	dep.Spec.Template.Spec.NodeName = node
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning(ns, "app="+name, int(replicas), time.Minute)
	// Replacements are scheduled normally; changing the template would roll the
	// pods, so the running ones keep their node and new ones get none.
	testenv.Eventually(t, 30*time.Second, "pausing "+name, func(ctx context.Context) (bool, string, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		rs, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(rs.Items) != 1 {
			return false, fmt.Sprint(len(rs.Items), " replicasets"), err
		}
		r := rs.Items[0]
		r.Spec.Template.Spec.NodeName = ""
		d.Spec.Paused = true
		if _, err := env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return false, "", err
		}
		_, err = env.Client.AppsV1().ReplicaSets(ns).Update(ctx, &r, metav1.UpdateOptions{})
		return err == nil, "", err
	})
}

func daemonSet(ctx context.Context, t *testing.T, env *testenv.Env, ns, name, node string) {
	t.Helper()
	pod := tu.Pod(name, tu.WithLabels("app", name))
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec},
		},
	}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	if _, err := env.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning(ns, "app="+name, 1, time.Minute)
}

// createPDB creates pdb in namespace ns.
func createPDB(ctx context.Context, t *testing.T, env *testenv.Env, ns string, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	pdb.Namespace = ns
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPDB(t *testing.T, env *testenv.Env, ns, name string, allowed int32) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("PDB %s/%s to allow %d disruptions", ns, name, allowed), func(ctx context.Context) (bool, string, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == allowed && p.Status.ExpectedPods > 0,
			fmt.Sprintf("%+v", p.Status), nil
	})
}

func podsOn(ctx context.Context, t *testing.T, env *testenv.Env, node string) []corev1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func getNode(ctx context.Context, t *testing.T, env *testenv.Env, name string) *corev1.Node {
	t.Helper()
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// waitEvent waits for an events.k8s.io Event with the reason, in ns, about the
// named object (any object when name is "").
func waitEvent(t *testing.T, env *testenv.Env, ns, name, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "event "+reason, func(ctx context.Context) (bool, string, error) {
		sel := fields.Set{"reason": reason}
		if name != "" {
			sel["regarding.name"] = name
		}
		list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
		if err != nil {
			return false, "", err
		}
		return len(list.Items) > 0, "", nil
	})
}

// markLikeACrash puts a drain mark, taint and cordon on a node, as a drain
// killed after marking leaves them.
func markLikeACrash(ctx context.Context, t *testing.T, env *testenv.Env, name, by string) {
	t.Helper()
	// The node controller changes a node's taints after it is cordoned or
	// uncordoned: another update may come between the read and the write.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node := getNode(ctx, t, env, name)
		node.Annotations[drain.DrainingAnnotation] = fmt.Sprintf(`{"by":%q,"reason":"interrupted","at":"2026-01-01T00:00:00Z","cordoned":true}`, by)
		node.Spec.Unschedulable = true
		if !hasTaint(node, drain.DrainingTaintKey) {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: drain.DrainingTaintKey, Value: by, Effect: corev1.TaintEffectNoSchedule})
		}
		_, err := env.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
