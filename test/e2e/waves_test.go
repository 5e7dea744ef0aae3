package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The most common layout: workloads of 6 replicas, 3 on each of two on-demand
// nodes, under budgets that allow one disruption at a time: a Deployment with
// maxUnavailable 1, a Deployment with minAvailable 5, and a StatefulSet with
// maxUnavailable 1. `spotter controller` drains both nodes in waves, one pod
// of each workload per wave, and ends with every pod on spot, while a watch
// running the whole time never sees more than one pod of any workload
// unavailable.
func TestReschedulerDrainsInWaves(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	env.CreateNodes(
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, CPU: "4"},
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-3", Class: lab.ClassSpot, CPU: "4"},
		lab.NodeSpec{Name: "spot-4", Class: lab.ClassSpot, CPU: "4"},
	)
	apps := []string{"web", "api", "db"}
	opts := []tu.PodOption{tu.CPU("100m"), tu.GracePeriod(1)}
	// Three of each on od-1, then three more on od-2.
	setUnschedulable(ctx, t, env, true, "od-2", "spot-1", "spot-2", "spot-3", "spot-4")
	for _, app := range apps[:2] {
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, tu.Deployment(app, 3, opts...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.AppsV1().StatefulSets("default").Create(ctx, tu.StatefulSet("db", 3, opts...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range apps {
		env.WaitForPodsRunning("default", "app="+app, 3, time.Minute)
	}
	setUnschedulable(ctx, t, env, false, "od-2")
	setUnschedulable(ctx, t, env, true, "od-1")
	waitUntainted(t, env, "od-2")
	scale := []byte(`{"spec":{"replicas":6}}`)
	if _, err := env.Client.AppsV1().Deployments("default").Patch(ctx, "web", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AppsV1().Deployments("default").Patch(ctx, "api", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AppsV1().StatefulSets("default").Patch(ctx, "db", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range apps {
		env.WaitForPodsRunning("default", "app="+app, 6, time.Minute)
	}
	for _, pdb := range []struct {
		app string
		opt tu.PDBOption
	}{{"web", tu.MaxUnavailable(1)}, {"api", tu.MinAvailable(5)}, {"db", tu.MaxUnavailable(1)}} {
		if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB(pdb.app, pdb.app, pdb.opt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setUnschedulable(ctx, t, env, false, "od-1", "spot-1", "spot-2", "spot-3", "spot-4")
	waitUntainted(t, env, "od-1", "spot-1", "spot-2", "spot-3", "spot-4")
	waitPDBsComputed(ctx, t, env)
	for _, node := range []string{"od-1", "od-2"} {
		if n := len(podsOnNode(ctx, t, env, node)); n != 9 {
			t.Fatalf("%s runs %d pods before the test, want 3 of each workload: %s", node, n, podsByNode(ctx, t, env))
		}
	}

	// The watch: unavailable pods of each workload, polled all along.
	stopWatch := watchUnavailable(t, env, map[string]int{"web": 6, "api": 6, "db": 6})
	defer stopWatch()

	startRescheduler(t, env)

	testenv.Eventually(t, 3*time.Minute, "every pod Running on a spot node, both on-demand nodes empty", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app in (web,api,db)"})
		if err != nil {
			return false, "", err
		}
		onSpot := 0
		for _, p := range list.Items {
			if strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot++
			}
		}
		return onSpot == 18 && len(list.Items) == 18, podsByNode(ctx, t, env), nil
	})
	worst := stopWatch()
	for _, app := range apps {
		if worst[app] > 1 {
			t.Errorf("the watch saw %d %s pods unavailable at once; its budget allows 1", worst[app], app)
		}
		if worst[app] == 0 {
			t.Errorf("the watch never saw a %s pod unavailable: it did not watch the drains", app)
		}
	}
	// Both nodes were drained in three waves, as the Events say.
	for _, node := range []string{"od-1", "od-2"} {
		waitEventNote(t, env, node, drain.ReasonDrainStarted, "in 3 waves")
		waitEventNote(t, env, node, drain.ReasonDrainWave, "wave 3 of 3")
	}
	assertNoMarks(t, env)
}

// waitEventNote waits for an Event on the node with the reason whose note
// contains note.
func waitEventNote(t *testing.T, env *testenv.Env, node, reason, note string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("event %s on %s saying %q", reason, node, note), func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == node && e.Reason == reason {
				if strings.Contains(e.Note, note) {
					return true, "", nil
				}
				notes = append(notes, e.Note)
			}
		}
		return false, fmt.Sprint(notes), nil
	})
}

// watchUnavailable follows, until the returned stop is called, how many pods
// of each app (label app, with its replica count) are not Ready or are
// terminating; stop returns the most seen at once per app. See watchPods.
func watchUnavailable(t *testing.T, env *testenv.Env, replicas map[string]int) (stop func() map[string]int) {
	t.Helper()
	stopPods := watchPods(t, env, replicas)
	return func() map[string]int {
		t.Helper()
		return stopPods().worstUnavailable
	}
}

// podWatch is what watchPods saw.
type podWatch struct {
	// worstUnavailable is the most pods of each app not Ready or terminating
	// at once.
	worstUnavailable map[string]int
	// longestPending is the longest any pod of the namespace stayed Pending,
	// from its creation to the first change that showed it out of Pending
	// (or to stop).
	longestPending time.Duration
}

// watchPods follows the pods of namespace default, until the returned stop
// is called, after every change to them in the order the apiserver made
// them: how many pods of each app (label app, with its replica count) are not
// Ready or are terminating, and how long pods stay Pending. It watches rather
// than polls: an evicted pod is terminating before its replacement exists, so
// every eviction is seen, however soon kwok makes the replacement Ready.
// Stopping twice is harmless.
func watchPods(t *testing.T, env *testenv.Env, replicas map[string]int) (stop func() podWatch) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pods := map[types.UID]*corev1.Pod{}
	for i := range list.Items {
		pods[list.Items[i].UID] = &list.Items[i]
	}
	seen := podWatch{worstUnavailable: map[string]int{}}
	pendingFor := func(p *corev1.Pod) {
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
			seen.longestPending = max(seen.longestPending, time.Since(p.CreationTimestamp.Time))
		}
	}
	count := func() {
		ready := map[string]int{}
		for _, p := range pods {
			if p.DeletionTimestamp == nil && podReady(*p) {
				ready[p.Labels["app"]]++
			}
		}
		for app, n := range replicas {
			seen.worstUnavailable[app] = max(seen.worstUnavailable[app], n-ready[app])
		}
	}
	count()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return env.Client.CoreV1().Pods("default").Watch(ctx, opts)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	// The goroutine alone writes pods, seen and watchErr until done is
	// closed; stop reads them after.
	var watchErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			switch p, _ := ev.Object.(*corev1.Pod); {
			case ev.Type == watch.Error:
				watchErr = apierrors.FromObject(ev.Object)
			case p == nil:
			case ev.Type == watch.Deleted:
				if old := pods[p.UID]; old != nil {
					pendingFor(old)
				}
				delete(pods, p.UID)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if old := pods[p.UID]; old != nil && p.Status.Phase != old.Status.Phase {
					pendingFor(old) // it left Pending now
				}
				pods[p.UID] = p
			}
			count()
		}
	}()
	var result podWatch
	stopped := false
	return func() podWatch {
		t.Helper()
		if stopped {
			return result
		}
		stopped = true
		cancel()
		rw.Stop()
		<-done
		if watchErr != nil {
			t.Errorf("the watch of the pods failed, so it may have missed changes: %v", watchErr)
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				pendingFor(p) // still Pending now
			}
		}
		result = podWatch{worstUnavailable: maps.Clone(seen.worstUnavailable), longestPending: seen.longestPending}
		return result
	}
}
