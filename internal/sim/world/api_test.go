package world

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/snapshot"
)

// worldAfter runs the default scenario's world without a strategy for d, so
// that its pods are bound and Ready.
func worldAfter(t *testing.T, d time.Duration) (*World, func(time.Duration)) {
	t.Helper()
	sc := simtest.Short(t, 24*time.Hour)
	w, err := New(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, w)
	sched, as := mustScheduler(t, w), &Autoscaler{w: w, e: e}
	run := func(d time.Duration) {
		for range int(d / sc.Step.Duration) {
			w.Advance()
			if err := sched.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := as.Run(context.Background(), sched.Unschedulable); err != nil {
				t.Fatal(err)
			}
			w.Clock.Step(sc.Step.Duration)
		}
	}
	run(d)
	return w, run
}

// startDrain starts req with d on the world's clock; the function it returns
// moves the world a minute at a time, 20 minutes at most, until the drain
// ends, and returns what the drain returned.
func startDrain(t *testing.T, w *World, run func(time.Duration), d *drain.Drainer, req drain.Request) func() (*drain.Result, error) {
	var res *drain.Result
	var err error
	w.Clock.Go(func() { res, err = d.Drain(context.Background(), req) })
	return func() (*drain.Result, error) {
		t.Helper()
		for range 20 {
			if res != nil {
				break
			}
			run(time.Minute)
		}
		if res == nil {
			t.Fatal("the drain did not end in 20 minutes")
		}
		return res, err
	}
}

// The product's drain engine, on the simulator's clientset and clock, drains
// a node of the world: it taints and cordons it through node updates, evicts
// every pod through the world's Eviction API (counted for its component),
// waits for them to go as the world moves, and removes its marks.
func TestDrainEngineOnTheWorld(t *testing.T) {
	w, run := worldAfter(t, 3*time.Hour)
	a := NewAPI(w)
	var target *Node
	for _, n := range w.nodes {
		if n.Ready() && !n.Group.Spot && len(n.pods) > 0 && (target == nil || len(n.pods) > len(target.pods)) {
			target = n
		}
	}
	if target == nil {
		t.Fatal("no on-demand node with pods")
	}
	pods := len(target.pods)
	d := drain.New(a.Kube, w.Clock, nil, drain.Options{Component: "rescheduler", Cordon: true, Timeout: 10 * time.Minute})
	wait := startDrain(t, w, run, d, drain.Request{Node: target.Name, Reason: "test", LeaveCordoned: true})
	// The drain evicts at once; its marks are on the node while the pods go.
	w.Clock.RunUntil(w.Now().Add(time.Second))
	if target.Draining != "rescheduler" || !target.Cordoned {
		t.Errorf("while draining: taint %q, cordoned %v; want the drain engine's taint and a cordon", target.Draining, target.Cordoned)
	}
	res, derr := wait()
	// The scenario's budgets may refuse some evictions: what was evicted is
	// what the world counted, and a drain without error left no pod.
	if got := w.m.evictBy["spotter-"+rescheduler.Component]; got != len(res.Evicted) {
		t.Errorf("the world counted %d evictions by the rescheduler, the drain reports %d", got, len(res.Evicted))
	}
	if derr == nil {
		if len(res.Evicted) != pods || len(target.pods) != 0 {
			t.Errorf("drain succeeded with %d of %d pods evicted, %d left on the node", len(res.Evicted), pods, len(target.pods))
		}
		if w.m.wasted != 0 {
			t.Errorf("a drain that succeeded counted %d wasted evictions", w.m.wasted)
		}
		if target.Draining != "" || !target.Cordoned {
			t.Errorf("after the drain: taint %q, cordoned %v; want no drain taint, still cordoned (LeaveCordoned)", target.Draining, target.Cordoned)
		}
	} else if len(res.Blocked) == 0 {
		t.Errorf("drain failed (%v) and names no blocked pod", derr)
	}
}

// A drain of Spotter's that is rolled back after evicting pods (here its
// re-check refuses every pod after the first) wasted those evictions: the
// world counts them, as it does the abandoned drains of the
// k8s-spot-rescheduler model.
func TestRolledBackDrainEvictionsAreWasted(t *testing.T) {
	w, run := worldAfter(t, 3*time.Hour)
	a := NewAPI(w)
	var target *Node
	for _, n := range w.nodes {
		if n.Ready() && !n.Group.Spot && len(n.pods) > 1 {
			target = n
			break
		}
	}
	if target == nil {
		t.Fatal("no on-demand node with two pods")
	}
	d := drain.New(a.Kube, w.Clock, nil, drain.Options{Component: "migrator", Timeout: 10 * time.Minute, MaxConcurrentEvictions: 1})
	asked := 0
	recheck := func(context.Context, *corev1.Pod) error {
		if asked++; asked > 1 {
			return errors.New("no longer fits")
		}
		return nil
	}
	res, derr := startDrain(t, w, run, d, drain.Request{Node: target.Name, Reason: "test", BeforeEvict: recheck})()
	if derr == nil || !res.RolledBack || len(res.Evicted) != 1 {
		t.Fatalf("drain: err %v, rolled back %v, %d evicted; want a rollback after 1 eviction", derr, res.RolledBack, len(res.Evicted))
	}
	if target.Draining != "" {
		t.Errorf("the rolled-back drain left its taint %q", target.Draining)
	}
	if w.m.wasted != 1 || w.m.evictBy["spotter-"+migrator.Component] != 1 {
		t.Errorf("wasted %d, evictions by the migrator %d; want 1 and 1", w.m.wasted, w.m.evictBy["spotter-"+migrator.Component])
	}
}

// The clientset refuses what the apiserver refuses: an update from a stale
// read (Conflict), an eviction a PodDisruptionBudget does not allow (429), a
// pod that is not there (NotFound).
func TestAPIRefusals(t *testing.T) {
	w, _ := worldAfter(t, 3*time.Hour)
	a := NewAPI(w)
	ctx := context.Background()
	nodes := a.Kube.CoreV1().Nodes()
	name := w.ReadyNodes()[0].Name
	stale, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Labels["example.com/x"] = "1"
	if _, err := nodes.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := w.NodeByName(name).Obj.Labels["example.com/x"]; got != "1" {
		t.Errorf("label written through the clientset reads %q in the world", got)
	}
	stale.Spec.Unschedulable = true
	if _, err := nodes.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update from a stale read: %v, want a Conflict", err)
	}

	// Evict a budgeted app's pods until its budget refuses.
	var app *App
	for _, x := range w.Apps {
		if x.PDB != nil && len(x.pods) > 1 {
			app = x
			break
		}
	}
	if app == nil {
		t.Fatal("no app with a PodDisruptionBudget and pods")
	}
	refused := false
	for _, p := range append([]*Pod(nil), app.pods...) {
		err := a.Kube.CoreV1().Pods(p.Obj.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Obj.Name, Namespace: p.Obj.Namespace}})
		if apierrors.IsTooManyRequests(err) {
			refused = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !refused {
		t.Errorf("every pod of %s was evicted despite its budget", app.Name)
	}
	if err := a.Kube.CoreV1().Pods("shop").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "nothing", Namespace: "shop"}}); !apierrors.IsNotFound(err) {
		t.Errorf("evicting a pod that is not there: %v, want NotFound", err)
	}

	// The reader and a field-selected list agree with the world.
	snap, err := snapshot.FromReader(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != len(w.ReadyNodes()) || snap.Revision == "" {
		t.Errorf("snapshot from the reader: %d nodes (world %d), revision %q", len(snap.Nodes), len(w.ReadyNodes()), snap.Revision)
	}
	var list corev1.PodList
	if err := a.List(ctx, &list); err != nil || len(list.Items) != len(snap.Pods) {
		t.Errorf("pod list: %d items, err %v; snapshot %d", len(list.Items), err, len(snap.Pods))
	}
}

// The provider refuses a spot increase the zone's market cannot hold, at
// once and with nothing launched.
func TestProviderCapacity(t *testing.T) {
	w, _ := worldAfter(t, time.Hour)
	ctx := context.Background()
	groups, err := Provider{w}.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if !g.Spot() {
			continue
		}
		wg := w.Groups[0]
		for _, x := range w.Groups {
			if x.Name == g.ID() {
				wg = x
			}
		}
		room := wg.zone.Capacity(w.Elapsed()) - w.spotNodes(wg.zone)
		if room < 0 || wg.count+room+1 > int(wg.Max) {
			continue
		}
		wg.zone.StockOutDelay = 0 // a cloud that refuses at once (TestLateStockOut: one that reports late)
		before := wg.count
		err := g.IncreaseSize(ctx, room+1)
		if !cloud.IsCapacityUnavailable(err) || wg.count != before {
			t.Errorf("group %s: %d nodes beyond the market's room: %v, %d nodes launched; want CapacityUnavailable and none", g.ID(), room+1, err, wg.count-before)
		}
		return
	}
	t.Skip("no spot group with room under its maximum")
}

// The world's snapshot (snapshot.Snapshotter) holds what the lists hold, in
// their order, with the same Revision; the caller may reorder its slices
// without reordering the next one.
func TestAPISnapshotIsTheLists(t *testing.T) {
	w, run := worldAfter(t, 3*time.Hour)
	// Pods go (and their replacements come, with new names).
	for _, p := range slices.Clone(w.pods[:5]) {
		w.DeletePod(p)
	}
	run(10 * time.Minute)
	a := NewAPI(w)
	ctx := context.Background()
	got, err := snapshot.FromReader(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	var pods corev1.PodList
	var pdbs policyv1.PodDisruptionBudgetList
	var nss corev1.NamespaceList
	for _, l := range []client.ObjectList{&nodes, &pods, &pdbs, &nss} {
		if err := a.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.Pods) == 0 || len(got.PDBs) == 0 {
		t.Fatalf("%s: want pods and budgets", got.Counts())
	}
	same := func(what string, inSnapshot, listed int, eq func(i int) bool) {
		t.Helper()
		if inSnapshot != listed {
			t.Errorf("%d %ss in the snapshot, %d listed", inSnapshot, what, listed)
			return
		}
		for i := range listed {
			if !eq(i) {
				t.Errorf("%s %d differs from the list's", what, i)
				return
			}
		}
	}
	same("node", len(got.Nodes), len(nodes.Items), func(i int) bool { return equality.Semantic.DeepEqual(got.Nodes[i], &nodes.Items[i]) })
	same("pod", len(got.Pods), len(pods.Items), func(i int) bool { return equality.Semantic.DeepEqual(got.Pods[i], &pods.Items[i]) })
	same("budget", len(got.PDBs), len(pdbs.Items), func(i int) bool { return equality.Semantic.DeepEqual(got.PDBs[i], &pdbs.Items[i]) })
	same("namespace", len(got.Namespaces), len(nss.Items), func(i int) bool { return equality.Semantic.DeepEqual(got.Namespaces[i], &nss.Items[i]) })
	if got.Revision == "" || got.Revision != a.Revision() {
		t.Errorf("revision %q, want the api's %q", got.Revision, a.Revision())
	}
	// Pods in the order a LIST gives them, after pods came and went: every
	// pod of the world not lost, once.
	if !slices.IsSortedFunc(got.Pods, func(x, y *corev1.Pod) int { return snapshot.CompareKeys(x.Namespace, x.Name, y.Namespace, y.Name) }) {
		t.Error("the snapshot's pods are not in the order of their keys")
	}
	inWorld := 0
	for _, p := range w.pods {
		if !p.lost {
			inWorld++
		}
	}
	if len(got.Pods) != inWorld || len(w.byKey) != len(w.pods) {
		t.Errorf("%d pods in the snapshot, %d kept in key order, of %d pods (%d not lost) in the world", len(got.Pods), len(w.byKey), len(w.pods), inWorld)
	}
	first := got.Pods[0]
	slices.Reverse(got.Pods)
	again, err := snapshot.FromReader(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pods[0] != first {
		t.Error("reordering a snapshot's pods reordered the next snapshot's")
	}
}
