package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func TestFromCluster(t *testing.T) {
	it := tu.NodeLabel("node.kubernetes.io/instance-type", "m5.xlarge")
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od1", tu.OnDemand(), tu.Zone("z1"), it), tu.Node("od2", tu.OnDemand(), tu.Zone("z2"), it)},
		PDBs:  []*policyv1.PodDisruptionBudget{tu.PDB("web", "web", tu.MaxUnavailable(1))},
	}
	for i := range 4 {
		s.Pods = append(s.Pods, tu.Pod(fmt.Sprintf("web-abc-%d", i), tu.OnNode("od1"), tu.CPU("500m"), tu.Memory("1Gi"),
			tu.WithLabels("app", "web"), tu.OwnedBy("ReplicaSet", "web-abc"), tu.Phase(corev1.PodRunning)))
	}
	s.Pods = append(s.Pods, tu.Pod("ds-1", tu.OnNode("od1"), tu.OwnedBy("DaemonSet", "ds")))

	_, _, err := FromCluster(s, v1alpha1.PricingConfig{Currency: "USD"})
	if err == nil || !strings.Contains(err.Error(), "no price for instance type(s) m5.xlarge") {
		t.Fatalf("without prices: %v", err)
	}
	pricing := v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}
	sc, opts, err := FromCluster(s, pricing)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Zones) != 2 || len(sc.NodeGroups) != 4 {
		t.Errorf("zones %d, groups %d (want 2 on-demand groups and their spot twins)", len(sc.Zones), len(sc.NodeGroups))
	}
	sc.Duration.Duration = 6 * time.Hour
	opts.Strategies = []string{StrategySpotter}
	rep, err := Run(context.Background(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Cost <= 0 || rep.Results[0].PDBViolations != 0 {
		t.Errorf("baseline cost %.2f, violations %d", rep.Baseline.Cost, rep.Results[0].PDBViolations)
	}
}
