package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// `spotter simulate --from-cluster` reads a real cluster's nodes and
// workloads through the API and simulates them, priced from the
// configuration; a missing price is a clear error naming the instance type.
func TestSimulateFromCluster(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	if err := lab.CreateNodes(ctx, env.Client,
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, InstanceType: "m5.xlarge", Zone: "zone-a"},
		lab.NodeSpec{Name: "od-2", Class: lab.ClassOnDemand, InstanceType: "m5.xlarge", Zone: "zone-b"},
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, InstanceType: "m5.xlarge", Zone: "zone-a"},
	); err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"od-1", "od-1", "od-2", "spot-1"} {
		p := tu.Pod(fmt.Sprintf("web-%d", i), tu.InNamespace("default"), tu.OnNode(node), tu.CPU("500m"), tu.Memory("512Mi"),
			tu.WithLabels("app", "web"), tu.OwnedBy("ReplicaSet", "web-5d8f"))
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	noPrices := filepath.Join(t.TempDir(), "none.yaml")
	if err := os.WriteFile(noPrices, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runSpotter("simulate", "--from-cluster", "--kubeconfig", env.Kubeconfig, "--config", noPrices, "--out", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no price for instance type(s) m5.xlarge") || !strings.Contains(errOut, "pricing.instanceTypes") {
		t.Errorf("without prices: exit %d, want one error naming m5.xlarge and pricing.instanceTypes:\n%s", code, errOut)
	}

	config := filepath.Join(t.TempDir(), "spotter.yaml")
	body := "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\npricing:\n  instanceTypes:\n    m5.xlarge: {onDemand: 0.192, spot: 0.07}\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, errOut := runSpotter("simulate", "--from-cluster", "--kubeconfig", env.Kubeconfig, "--config", config,
		"--duration", "1d", "--strategies", "none,spotter", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "read 3 nodes, 4 pods") {
		t.Errorf("stderr should say what was read from the cluster:\n%s", errOut)
	}
	for _, row := range []string{"none", "spotter"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("no %s row in the table:\n%s", row, stdout)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report map[string]any
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !strings.Contains(string(data), `"from-cluster"`) {
		t.Errorf("report.json does not name the from-cluster scenario")
	}
}
