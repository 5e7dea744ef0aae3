package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"spotter.dev/spotter/internal/sim/strategy"
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

	_, _, err := FromCluster(s, ClusterPrices{Pricing: v1alpha1.PricingConfig{Currency: "USD"}})
	if err == nil || !strings.Contains(err.Error(), "no price for instance type(s) m5.xlarge") || !strings.Contains(err.Error(), "add pricing.instanceTypes.m5.xlarge") {
		t.Fatalf("without prices: %v", err)
	}
	pricing := v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}
	sc, opts, err := FromCluster(s, ClusterPrices{Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Zones) != 2 || len(sc.NodeGroups) != 4 {
		t.Errorf("zones %d, groups %d (want 2 on-demand groups and their spot twins)", len(sc.Zones), len(sc.NodeGroups))
	}
	sc.Duration.Duration = 6 * time.Hour
	opts.Strategies = []string{strategy.Spotter}
	rep, err := Run(context.Background(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Cost <= 0 || rep.Results[0].PDBViolations != 0 {
		t.Errorf("baseline cost %.2f, violations %d", rep.Baseline.Cost, rep.Results[0].PDBViolations)
	}
}

// Prices from the cloud (ClusterPrices.Price, as spotter simulate
// --from-cluster passes the provider's): each group is priced where its
// nodes run, a spot twin only where the type's spot price is known, and a
// type priced by neither the cloud nor the configuration is an error
// naming the provider and the configuration field.
func TestFromClusterCloudPrices(t *testing.T) {
	n2 := tu.NodeLabel("node.kubernetes.io/instance-type", "n2-standard-4")
	e2 := tu.NodeLabel("node.kubernetes.io/instance-type", "e2-medium")
	s := &snapshot.Snapshot{Nodes: []*corev1.Node{
		tu.Node("od-a", tu.OnDemand(), tu.Zone("us-central1-a"), n2), tu.Node("od-eu", tu.OnDemand(), tu.Zone("europe-west1-b"), n2),
		tu.Node("spot-a", tu.Spot(), tu.Zone("us-central1-a"), e2), tu.Node("od-e2", tu.OnDemand(), tu.Zone("us-central1-a"), e2),
	}}
	for i := range 2 {
		s.Pods = append(s.Pods, tu.Pod(fmt.Sprintf("web-abc-%d", i), tu.OnNode("od-a"), tu.CPU("500m"), tu.OwnedBy("ReplicaSet", "web-abc"), tu.Phase(corev1.PodRunning)))
	}
	// The "cloud": n2 on-demand 0.19 in us-central1, 0.21 in Europe, spot
	// only in us-central1; e2-medium 0.0335, spot 0.01; nothing else.
	cloudPrice := func(n *corev1.Node, spot bool) (float64, bool) {
		eu := strings.HasPrefix(n.Labels[corev1.LabelTopologyZone], "europe")
		switch n.Labels["node.kubernetes.io/instance-type"] + map[bool]string{true: "/spot", false: "/od"}[spot] {
		case "n2-standard-4/od":
			return map[bool]float64{false: 0.19, true: 0.21}[eu], true
		case "n2-standard-4/spot":
			return 0.05, !eu
		case "e2-medium/spot":
			return 0.01, true
		case "e2-medium/od":
			return 0.0335, true
		}
		return 0, false
	}
	sc, _, err := FromCluster(s, ClusterPrices{Pricing: v1alpha1.PricingConfig{Currency: "USD"}, Price: cloudPrice, Provider: "gcp"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, g := range sc.NodeGroups {
		got[g.Zone+"/"+g.CapacityType+"/"+g.InstanceType] = g.PricePerHour
	}
	want := map[string]float64{
		"us-central1-a/on-demand/n2-standard-4": 0.19, "us-central1-a/spot/n2-standard-4": 0.05, // a twin at the cloud's spot price
		"europe-west1-b/on-demand/n2-standard-4": 0.21, // no twin: no spot price there
		"us-central1-a/spot/e2-medium":           0.01, "us-central1-a/on-demand/e2-medium": 0.0335,
	}
	if len(got) != len(want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("group %s: price %v, want %v (all: %v)", k, got[k], v, got)
		}
	}

	s.Nodes = append(s.Nodes, tu.Node("od-x", tu.OnDemand(), tu.Zone("us-central1-a"), tu.NodeLabel("node.kubernetes.io/instance-type", "x9-standard-4")))
	_, _, err = FromCluster(s, ClusterPrices{Pricing: v1alpha1.PricingConfig{Currency: "USD"}, Price: cloudPrice, Provider: "gcp"})
	if err == nil || !strings.Contains(err.Error(), "no price for instance type(s) x9-standard-4: the cloud provider gcp gives none; add pricing.instanceTypes.x9-standard-4") {
		t.Errorf("a type priced by neither: %v", err)
	}
}
