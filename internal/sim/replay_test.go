package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// decision is a drain the simulated rescheduler started: the world as it was
// when the controller planned it, the node it marked, and the pods it evicted
// at that moment (namespace/name, sorted).
type decision struct {
	at      time.Time
	node    string
	state   *snapshot.Snapshot
	evicted []string
}

// recordDecisions taps the API of a simulated spotter strategy and records
// its rescheduler's first n drains: the world before the write that marks
// the node (the controller planned on that world: nothing else runs between
// its read and its write on the world's clock), and the evictions of its
// drain at the same instant (the node's pods, and those its consolidation
// displaces from other nodes).
func recordDecisions(n int, out *[]decision) func(*world.World, *world.API) {
	return func(w *world.World, a *world.API) {
		a.Kube.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
			res, verb := action.GetResource().Resource, action.GetVerb()
			var before *snapshot.Snapshot
			if res == "nodes" && (verb == "update" || verb == "patch") && action.GetSubresource() == "" && len(*out) < n {
				before = w.Snapshot().DeepCopy()
			}
			var evicted *world.Pod
			if ev, ok := action.(k8stesting.CreateActionImpl); ok && action.GetSubresource() == "eviction" {
				if e, ok := ev.GetObject().(*policyv1.Eviction); ok && e.Labels[drain.EvictedByLabel] == rescheduler.Component {
					evicted = a.Pod(e.Namespace, e.Name)
				}
			}
			handled, obj, err := a.React(action)
			if err != nil {
				return handled, obj, err
			}
			if node, ok := obj.(*corev1.Node); ok && before != nil {
				m, marked, _ := drain.MarkOf(node)
				if marked && m.By == rescheduler.Component && !markedIn(before, node.Name) {
					*out = append(*out, decision{at: w.Now(), node: node.Name, state: before})
				}
			}
			if evicted != nil && evicted.Node != nil && len(*out) > 0 {
				// The rescheduler drains one node at a time: its evictions at
				// the instant it marked the node are that drain's, the pods a
				// consolidation displaces from other nodes included.
				d := &(*out)[len(*out)-1]
				if d.at.Equal(w.Now()) {
					d.evicted = append(d.evicted, evicted.Obj.Namespace+"/"+evicted.Obj.Name)
					sort.Strings(d.evicted)
				}
			}
			return handled, obj, err
		})
	}
}

func markedIn(s *snapshot.Snapshot, node string) bool {
	for _, n := range s.Nodes {
		if n.Name == node {
			_, ok, _ := drain.MarkOf(n)
			return ok
		}
	}
	return false
}

// The spotter row is what `spotter controller` does: the first drains the
// simulated rescheduler starts in the default scenario, replayed in a real
// kube-apiserver (the world as the controller saw it when it planned each
// one, written as objects) and handed to the spotter binary with the same
// configuration, give the same decision: the same node marked, and the same
// pods evicted before the drain waits for their replacements.
//
// The replay has no scheduler, kubelet or controller-manager: nothing moves
// until the binary acts, evicted pods stay Terminating, and the budgets'
// status is the world's, which the Eviction API then keeps (it counts each
// eviction against disruptionsAllowed, as the world does).
func TestSimulatedDecisionsReplayInTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real kube-apiserver; skipped with -short")
	}
	const drains = 3
	sc := simtest.Short(t, 36*time.Hour)
	var got []decision
	_, err := Run(context.Background(), sc, Options{Strategies: []string{strategy.Spotter}, tap: recordDecisions(drains, &got)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < drains {
		t.Fatalf("the simulated rescheduler started %d drains in %s; the test replays %d", len(got), sc.Duration.Duration, drains)
	}
	// The configuration the simulated controllers ran with: the defaults,
	// and the scenario's list prices as the pricing section.
	data, err := v1alpha1.Marshal(strategy.WithScenarioPrices(v1alpha1.NewDefaults(), sc))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, d := range got {
		t.Run(fmt.Sprintf("drain-%d", i+1), func(t *testing.T) {
			if len(d.evicted) == 0 {
				t.Fatalf("the simulated drain of %s at %s evicted nothing at its start", d.node, d.at)
			}
			env := testenv.StartAPIServer(t)
			ctx := testenv.Context(t, 3*time.Minute)
			replayed, err := testenv.WriteSnapshot(ctx, env.Config, d.state, testenv.WriteOptions{Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")

			// The drain's first evictions, once no more come for a while: the
			// drain then waits for replacements that never come here.
			var marked, evicted []string
			last, changed := "", time.Now()
			testenv.Eventually(t, 2*time.Minute, "the controller to mark a node and evict its first pods", func(ctx context.Context) (bool, string, error) {
				var err error
				if marked, evicted, err = observe(ctx, env.Client, replayed); err != nil {
					return false, "", err
				}
				now := fmt.Sprint(marked, evicted)
				if now != last {
					last, changed = now, time.Now()
				}
				return len(evicted) > 0 && time.Since(changed) > 5*time.Second, now, nil
			})
			if !slices.Equal(marked, []string{d.node}) {
				t.Errorf("the simulation drained %s at %s; spotter controller on that cluster marked %v", d.node, d.at.Format(time.RFC3339), marked)
			}
			if !slices.Equal(evicted, d.evicted) {
				t.Errorf("drain of %s at %s: the simulation evicted %v; spotter controller evicted %v", d.node, d.at.Format(time.RFC3339), d.evicted, evicted)
			}
		})
	}
}

// observe returns the nodes that carry a drain mark and the replayed pods
// that became Terminating or were deleted (namespace/name, sorted), leaving
// out those terminating in the replayed state.
func observe(ctx context.Context, c kubernetes.Interface, replayed map[string]bool) (marked, evicted []string, err error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range nodes.Items {
		if _, ok, _ := drain.MarkOf(&n); ok {
			marked = append(marked, n.Name)
		}
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	for _, p := range pods.Items {
		key := p.Namespace + "/" + p.Name
		present[key] = true
		if wasTerminating, ok := replayed[key]; ok && !wasTerminating && p.DeletionTimestamp != nil {
			evicted = append(evicted, key)
		}
	}
	for key, wasTerminating := range replayed {
		if !wasTerminating && !present[key] {
			evicted = append(evicted, key)
		}
	}
	sort.Strings(marked)
	sort.Strings(evicted)
	return marked, evicted, nil
}
