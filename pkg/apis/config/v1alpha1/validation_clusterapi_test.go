package v1alpha1

import (
	"strings"
	"testing"
)

func TestClusterAPIConfig(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // "" means valid
	}{
		{"the same cluster, every group", "cloud:\n  provider: clusterapi\n", ""},
		{"scoped", "cloud:\n  provider: clusterapi\n  clusterAPI:\n    managementKubeconfig: /etc/spotter/mgmt.kubeconfig\n" +
			"    clusterName: prod-eu\n    namespace: clusters\n    labelSelector: spotter.dev/managed=true,tier!=gpu\n", ""},
		{"a bad cluster name", "cloud:\n  provider: clusterapi\n  clusterAPI:\n    clusterName: Prod_EU\n",
			`cloud.clusterAPI.clusterName: Invalid value: "Prod_EU": the name of a Cluster API Cluster`},
		{"a bad namespace", "cloud:\n  provider: clusterapi\n  clusterAPI:\n    namespace: a.b\n",
			`cloud.clusterAPI.namespace: Invalid value: "a.b": a namespace of the management cluster`},
		{"a bad selector", "cloud:\n  provider: clusterapi\n  clusterAPI:\n    labelSelector: \"a in (b\"\n",
			`cloud.clusterAPI.labelSelector: Invalid value: "a in (b": a label selector of MachineDeployments, MachineSets and MachinePools`},
		{"a blank kubeconfig path", "cloud:\n  provider: clusterapi\n  clusterAPI:\n    managementKubeconfig: \" \"\n",
			`cloud.clusterAPI.managementKubeconfig: Invalid value: " ": a path to the management cluster's kubeconfig`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Parse([]byte(header + tc.body))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got %v", errs.ToAggregate())
				}
				if w := Warnings(c); len(w) != 0 {
					t.Errorf("warnings %q", w)
				}
				return
			}
			if c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("got %v, want one problem containing %s", errs.ToAggregate(), tc.want)
			}
		})
	}
}
