// Package integration holds tests against a real etcd and kube-apiserver that
// prove the harness: the Eviction API answers as Spotter's drain engine expects.
package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/internal/testutil"
)

// evict posts a policy/v1 Eviction for the pod and returns the HTTP status code.
func evict(t *testing.T, env *testenv.Env, ns, name string) int {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	body, err := json.Marshal(&policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	var code int
	res := env.Client.CoreV1().RESTClient().Post().
		Namespace(ns).Resource("pods").Name(name).SubResource("eviction").
		Body(body).SetHeader("Content-Type", "application/json").
		Do(ctx).StatusCode(&code)
	if code == 0 {
		t.Fatalf("eviction of %s/%s: no response: %v", ns, name, res.Error())
	}
	return code
}

func TestEvictionAllowedAndRefusedByPDB(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)

	// Two running, ready pods, each covered by its own PDB. Without a
	// controller-manager the PDB status is set here, as the disruption
	// controller would: one budget allows a disruption, the other does not.
	for _, tc := range []struct {
		app     string
		allowed int32
	}{{"free", 1}, {"guarded", 0}} {
		pod := testutil.Pod(tc.app, testutil.OnNode("node-1"), testutil.WithLabels("app", tc.app))
		pod, err := env.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = testutil.RunningReady()
		if _, err := env.Client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx,
			testutil.PDB(tc.app, tc.app, testutil.MinAvailable(1-tc.allowed)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: pdb.Generation,
			DisruptionsAllowed: tc.allowed,
			CurrentHealthy:     1,
			DesiredHealthy:     1 - tc.allowed,
			ExpectedPods:       1,
		}
		if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	if code := evict(t, env, "default", "free"); code != http.StatusCreated {
		t.Errorf("eviction allowed by its PDB: got HTTP %d, want 201", code)
	}
	if code := evict(t, env, "default", "guarded"); code != http.StatusTooManyRequests {
		t.Errorf("eviction refused by its PDB: got HTTP %d, want 429", code)
	}

	// The allowed eviction started a graceful deletion; the refused one did not.
	free, err := env.Client.CoreV1().Pods("default").Get(ctx, "free", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if free.DeletionTimestamp == nil {
		t.Error("evicted pod has no deletionTimestamp")
	}
	guarded, err := env.Client.CoreV1().Pods("default").Get(ctx, "guarded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if guarded.DeletionTimestamp != nil {
		t.Error("pod protected by its PDB is being deleted")
	}
}
