package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The drains' re-check, fed by the manager's informers as `spotter
// controller` feeds it, follows the cluster: a pod that fills the spot node
// makes the next answer "no" without building the snapshot again (the pod's
// event is applied); a cordon builds it again; a heartbeat of a node's status
// does not.
func TestResidentFollowsTheCache(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	var res *plan.Resident
	mgr := env.StartCache(ctx, t, func(mgr ctrl.Manager) error {
		res = plan.New(plan.Options{}).NewResident(func(ctx context.Context) (*snapshot.Snapshot, error) {
			return snapshot.FromReader(ctx, mgr.GetCache())
		})
		return feedResidents(ctx, mgr, plan.Residents{res})
	})

	for _, n := range []*corev1.Node{tu.Node("od-1", tu.OnDemand(), tu.Capacity("4", "16Gi")), tu.Node("spot-1", tu.Spot(), tu.Capacity("2", "16Gi"))} {
		created, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if created, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		created.Spec.Taints = nil // the not-ready taint admission put on it
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := running(ctx, t, env, tu.Pod("web-0", tu.OnNode("od-1"), tu.OwnedBy("ReplicaSet", "web"), tu.CPU("1")))
	ask := func(want string) plan.ResidentStats {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "the re-check's answer", func(ctx context.Context) (bool, string, error) {
			dest, why, err := res.FitsOnSpot(ctx, web)
			return dest == want, "destination " + dest + ": " + why, err
		})
		return res.Stats()
	}
	first := ask("spot-1")
	if first.Builds == 0 {
		t.Fatalf("no snapshot built: %+v", first)
	}

	running(ctx, t, env, tu.Pod("big-0", tu.OnNode("spot-1"), tu.OwnedBy("ReplicaSet", "big"), tu.CPU("1500m")))
	full := ask("")
	if full.Builds != first.Builds || full.Applied == first.Applied {
		t.Errorf("a pod's arrival was not applied to the kept snapshot: before %+v, after %+v", first, full)
	}

	spot, err := env.Client.CoreV1().Nodes().Get(ctx, "spot-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spot.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now())
	if spot, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, spot, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "big-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	freed := ask("spot-1")
	if freed.Builds != first.Builds {
		t.Errorf("a heartbeat built the snapshot again: before %+v, after %+v", full, freed)
	}

	spot.Spec.Unschedulable = true
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, spot, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cordoned := ask("")
	if cordoned.Builds == freed.Builds {
		t.Errorf("a cordon did not build the snapshot again: before %+v, after %+v", freed, cordoned)
	}

	// A new budget builds it again (the hold for nodes under notice reads
	// which pods budgets cover); a change of a budget's status does not.
	budget := tu.PDB("web", "web", tu.MaxUnavailable(1))
	budget.Namespace = "default"
	if budget, err = env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, budget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var budgeted plan.ResidentStats
	testenv.Eventually(t, 30*time.Second, "a build after the budget's creation", func(ctx context.Context) (bool, string, error) {
		_, _, err := res.FitsOnSpot(ctx, web)
		budgeted = res.Stats()
		return budgeted.Builds > cordoned.Builds, "", err
	})
	budget.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: budget.Generation, CurrentHealthy: 1, ExpectedPods: 1}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, budget, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the budget's status in the cache", func(ctx context.Context) (bool, string, error) {
		var got policyv1.PodDisruptionBudget
		err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(budget), &got)
		return err == nil && got.Status.ExpectedPods == 1, "", nil
	})
	time.Sleep(time.Second) // for the informer's handlers, which run after its store is updated
	if after := ask(""); after.Builds != budgeted.Builds {
		t.Errorf("a change of a budget's status built the snapshot again: before %+v, after %+v", budgeted, after)
	}
}

// running creates pod and reports it Running and Ready.
func running(ctx context.Context, t *testing.T, env *testenv.Env, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = tu.RunningReady()
	if p, err = env.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}
