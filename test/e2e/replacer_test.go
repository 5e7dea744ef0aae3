package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/controller/replacer"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// An interrupted spot node of a Cluster API MachineDeployment, against real
// Cluster API: the agent drains it on a preemption notice, and once its pods
// are gone the controller deletes its Machine; the MachineSet creates the
// replacement at once, without waiting for a health check, and the pods that
// left come back on the new node. The MachineDeployment's replicas do not
// change.
func TestClusterAPIInterruptedMachineReplaced(t *testing.T) {
	const ns, clusterName = "capi-replace", "lab"
	env, mgmt, dyn, ctx := startCAPILab(t, ns, 6*time.Minute)
	createCAPIGroups(ctx, t, dyn, ns, clusterName, 0, 2)
	if _, err := dyn.Resource(capiinfra.MachineDeploymentsGVR).Namespace(ns).Patch(ctx, "spot", types.MergePatchType,
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	old := capiMachines(t, env, dyn, ns, "spot", 1)[0]

	d := tu.Deployment("web", 2, tu.CPU("100m"), tu.GracePeriod(1), tu.RequireNodeLabel(lab.CapacityTypeLabel, "spot"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 2, time.Minute)

	config := filepath.Join(t.TempDir(), "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  provider: clusterapi
  clusterAPI:
    managementKubeconfig: %s
    clusterName: %s
    namespace: %s
migrator:
  enabled: true
  schedule: "@every 24h"
rescheduler:
  enabled: false
`, mgmt.Kubeconfig, clusterName, ns)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")

	emu := gcpmetadata.New(gcpmetadata.Options{})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	t.Cleanup(emu.Close)
	startAgent(t, env, old.node, "gcp", srv.URL, "")
	testenv.Eventually(t, 30*time.Second, "the agent to long-poll preempted", func(context.Context) (bool, string, error) {
		return emu.Waiting(gcpmetadata.PreemptedPath) > 0, "", nil
	})

	notice := time.Now()
	emu.SetPreempted(true)
	var replaced time.Duration
	testenv.Eventually(t, time.Minute, "the interrupted Machine deleted and another in its place", func(ctx context.Context) (bool, string, error) {
		all, err := machinesOf(ctx, dyn, ns, "spot")
		if err != nil {
			return false, "", err
		}
		oldLeft := false
		for _, m := range all {
			oldLeft = oldLeft || m.name == old.name
		}
		if !oldLeft && replaced == 0 {
			replaced = time.Since(notice)
		}
		return !oldLeft && len(all) == 1, fmt.Sprintf("spot Machines %v", all), nil
	})
	t.Logf("preemption notice to the Machine deleted and its replacement created: %s", replaced.Round(10*time.Millisecond))
	firstEventNote(t, env, replacer.ReasonReplacementRequested, 10*time.Second)
	fresh := capiMachines(t, env, dyn, ns, "spot", 1)[0]
	if fresh.name == old.name || !fresh.ownedBySet {
		t.Errorf("spot Machine %+v: want a new one made by the MachineSet", fresh)
	}
	for _, p := range env.WaitForPodsRunning("default", "app=web", 2, time.Minute) {
		if p.Spec.NodeName != fresh.node {
			t.Errorf("pod %s on %s, want the replacement node %s", p.Name, p.Spec.NodeName, fresh.node)
		}
	}
	obj, err := dyn.Resource(capiinfra.MachineDeploymentsGVR).Namespace(ns).Get(ctx, "spot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if replicas, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); replicas != 1 {
		t.Errorf("MachineDeployment spot: replicas %d, want 1 (a replacement, not a scale-down)", replicas)
	}
}
