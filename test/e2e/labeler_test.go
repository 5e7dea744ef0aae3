package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// `spotter controller` as a process: the labeler adds and removes the
// interruptible label and the PreferNoSchedule taint as nodes change class, and
// the manager serves health and metrics.
func TestLabelerAsProcess(t *testing.T) {
	env := testenv.StartLab(t)
	env.CreateNodes(
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot},
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand},
		lab.NodeSpec{Name: "cp-1", Class: lab.ClassControlPlane},
		// A control plane on spot: refused, and said so.
		lab.NodeSpec{Name: "cp-spot", Class: lab.ClassControlPlane, Labels: map[string]string{lab.CapacityTypeLabel: "spot"}},
		// A worker that Cluster API marked interruptible: spot, and its label is
		// Cluster API's, never removed.
		lab.NodeSpec{Name: "capi-1", Labels: map[string]string{"cluster.x-k8s.io/interruptible": "", "node-role.kubernetes.io/worker": ""}},
	)
	config := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nlabeler:\n  preferSpotTaint: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics, health := testenv.FreeAddr(t), testenv.FreeAddr(t)
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", health)

	want := func(node string, label, taint bool) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s: interruptible label %v, on-demand taint %v", node, label, taint), func(ctx context.Context) (bool, string, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			_, hasLabel := n.Labels["cluster.x-k8s.io/interruptible"]
			hasTaint := false
			for _, tt := range n.Spec.Taints {
				if tt.Key == "spotter.dev/on-demand" && tt.Effect == corev1.TaintEffectPreferNoSchedule {
					hasTaint = true
				}
			}
			return hasLabel == label && hasTaint == taint, fmt.Sprintf("labels %v taints %v", n.Labels, n.Spec.Taints), nil
		})
	}
	want("spot-1", true, false)
	want("od-1", false, true)
	want("cp-1", false, false)

	// The nodes swap classes: the labeler follows.
	setCapacityType(t, env, "spot-1", "on-demand")
	setCapacityType(t, env, "od-1", "spot")
	want("spot-1", false, true)
	want("od-1", true, false)

	// By now the labeler has been through every node more than once: the node
	// Cluster API marked keeps its label and is not tainted on-demand.
	capi, err := env.Client.CoreV1().Nodes().Get(testenv.Context(t, time.Minute), "capi-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := capi.Labels["cluster.x-k8s.io/interruptible"]; !ok || v != "" || len(capi.Spec.Taints) > 0 && capi.Spec.Taints[0].Key == "spotter.dev/on-demand" {
		t.Errorf("the labeler fought Cluster API over capi-1: labels %v taints %v", capi.Labels, capi.Spec.Taints)
	}

	// The control-plane taint was kept, and Spotter wrote nothing on cp-1.
	cp, err := env.Client.CoreV1().Nodes().Get(testenv.Context(t, time.Minute), "cp-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Spec.Taints) != 1 || cp.Spec.Taints[0].Key != lab.ControlPlaneRole {
		t.Errorf("control-plane taints changed: %v", cp.Spec.Taints)
	}

	waitEventOn(t, env, "cp-spot", "SpotterControlPlaneOnSpot")
	testenv.Eventually(t, 30*time.Second, "spotter_control_plane_on_spot_nodes 1", func(context.Context) (bool, string, error) {
		return strings.Contains(scrape(t, env, metrics), "spotter_control_plane_on_spot_nodes 1"), "", nil
	})
	if n, err := env.Client.CoreV1().Nodes().Get(testenv.Context(t, time.Minute), "cp-spot", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if _, labelled := n.Labels["cluster.x-k8s.io/interruptible"]; labelled {
		t.Error("a control-plane node on spot was labelled interruptible")
	}

	for path, wantBody := range map[string]string{
		"http://" + health + "/healthz": "ok",
		"http://" + health + "/readyz":  "ok",
	} {
		testenv.Eventually(t, 30*time.Second, path, func(ctx context.Context) (bool, string, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, "", err
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && strings.Contains(string(body), wantBody), resp.Status, nil
		})
	}

	// Metrics are HTTPS and read only by an identity allowed to get /metrics,
	// checked by the apiserver (docs/metrics.md).
	ctx := testenv.Context(t, time.Minute)
	testenv.ScrapeContains(t, "https://"+metrics+"/metrics", env.ServiceAccountToken("prometheus", true), `spotter_nodes{class="spot"} 2`, 30*time.Second)
	for name, token := range map[string]string{"no token": "", "an account without the binding": env.ServiceAccountToken("nosy", false)} {
		if code, _, err := testenv.Scrape(ctx, "https://"+metrics+"/metrics", token); err != nil || code == http.StatusOK {
			t.Errorf("metrics read with %s: HTTP %d, %v; want a refusal", name, code, err)
		}
	}
}

func setCapacityType(t *testing.T, env *testenv.Env, node, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, lab.CapacityTypeLabel, value)
	if _, err := env.Client.CoreV1().Nodes().Patch(testenv.Context(t, time.Minute), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
