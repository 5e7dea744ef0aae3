package v1alpha1

import (
	"strings"
	"testing"
)

func TestGCPProvider(t *testing.T) {
	const ok = "cloud:\n  provider: gcp\n  gcp:\n    project: prod-123\n    nodeGroups:\n"
	for _, tc := range []struct {
		name, body string
		want       []string // nil means valid
	}{
		{"a zonal group", ok + "    - {instanceGroupManager: zones/europe-west1-b/instanceGroupManagers/spot-b, maxSize: 10}\n", nil},
		{"a regional group by URL", ok + "    - instanceGroupManager: https://compute.example/compute/v1/projects/prod-123/regions/europe-west1/instanceGroupManagers/od\n      minSize: 1\n      maxSize: 3\n", nil},
		{"by prefix and node pool, with an endpoint", "cloud:\n  provider: gcp\n  gcp:\n    project: prod-123\n    clusterName: prod\n    endpoint: http://127.0.0.1:8080\n    nodeGroups:\n" +
			"    - {namePrefix: gke-prod-, maxSize: 5}\n    - {nodePool: spot-pool, maxSize: 20}\n", nil},
		{"neither project nor groups", "cloud:\n  provider: gcp\n", []string{
			"cloud.gcp.project: Required value", "cloud.gcp.nodeGroups: Required value"}},
		{"two selectors, bad sizes", ok + "    - {namePrefix: gke-, nodePool: spot, minSize: 3, maxSize: 2}\n", []string{
			"cloud.gcp.nodeGroups[0]: Invalid value: 2: set exactly one of instanceGroupManager, namePrefix and nodePool",
			"cloud.gcp.nodeGroups[0].maxSize: Invalid value: 2: must be at least 1 and at least minSize"}},
		{"no selector, no maximum", ok + "    - {minSize: -1}\n", []string{
			"cloud.gcp.nodeGroups[0]: Invalid value: 0: set exactly one",
			"cloud.gcp.nodeGroups[0].minSize: Invalid value: -1",
			"cloud.gcp.nodeGroups[0].maxSize: Invalid value: 0"}},
		{"a group that is not a path", ok + "    - {instanceGroupManager: spot-b, maxSize: 1}\n", []string{
			`cloud.gcp.nodeGroups[0].instanceGroupManager: Invalid value: "spot-b": zones/<zone>/instanceGroupManagers/<name>`}},
		{"a prefix that is no name", ok + "    - {namePrefix: GKE_, maxSize: 1}\n", []string{
			`cloud.gcp.nodeGroups[0].namePrefix: Invalid value: "GKE_"`}},
		{"an endpoint with credentials", ok + "    - {namePrefix: gke-, maxSize: 1}\n    endpoint: https://user:secret@proxy\n", []string{
			`cloud.gcp.endpoint: Invalid value: "<redacted>"`}},
		{"a relative endpoint", ok + "    - {namePrefix: gke-, maxSize: 1}\n    endpoint: proxy:8080\n", []string{
			`cloud.gcp.endpoint: Invalid value: "proxy:8080": must be an absolute http:// or https:// URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Parse([]byte(header + tc.body))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problem(s), want %d: %v", len(errs), len(tc.want), errs.ToAggregate())
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("problem %d: %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}
