package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A snapshot over --max-snapshot-bytes is refused, saying how to raise the
// limit; /dev/zero is refused at once.
func TestPlanSnapshotIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.yaml")
	body := "apiVersion: v1\nkind: List\nitems:\n" + strings.Repeat("- {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n", 100)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "plan", "--snapshot", path, "--max-snapshot-bytes", "1Ki")
	if code != 1 || !strings.Contains(errOut, "the snapshot is larger than 1 KiB, the limit; if it is the right file, raise the limit with --max-snapshot-bytes (such as --max-snapshot-bytes=2Ki)") {
		t.Errorf("exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "plan", "--snapshot", path, "--max-snapshot-bytes", "lots"); code != 1 || !strings.Contains(errOut, `--max-snapshot-bytes: "lots" is not a size`) {
		t.Errorf("exit %d, %q", code, errOut)
	}
	if code, out, errOut := run(t, "plan", "--snapshot", path, "--max-snapshot-bytes", "1Mi"); code != 0 {
		t.Errorf("under the limit: exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if code, _, errOut := run(t, "plan", "--snapshot", "/dev/zero"); code != 1 || !strings.Contains(errOut, "is NUL: a snapshot is YAML or JSON text") {
			t.Errorf("/dev/zero: exit %d, %q", code, errOut)
		}
	}
}

// What loading finds odd is printed as warnings; what the API server would
// refuse is an error.
func TestPlanSnapshotChecks(t *testing.T) {
	node := "- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {karpenter.sh/capacity-type: on-demand}}, status: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}}\n"
	pod := func(name, nodeName, cpu string) string {
		return "- {apiVersion: v1, kind: Pod, metadata: {name: " + name + ", namespace: ns}, spec: {nodeName: " + nodeName +
			", containers: [{name: c, resources: {requests: {cpu: \"" + cpu + "\"}}}]}, status: {phase: Running}}\n"
	}
	path := filepath.Join(t.TempDir(), "snap.yaml")
	write := func(body string) {
		if err := os.WriteFile(path, []byte("items:\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(node + node + pod("p1", "n1", "100m") + pod("p2", "gone", "100m"))
	code, out, errOut := run(t, "plan", "--snapshot", path)
	if code != 0 || !strings.Contains(errOut, "warning: 1 object appears more than once, identical; it is counted once: Node n1") ||
		!strings.Contains(errOut, "warning: 1 pod is bound to a node that is not in the snapshot") || !strings.Contains(errOut, "read 1 node, 2 pods") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	write(node + pod("p1", "n1", "-1"))
	if code, _, errOut := run(t, "plan", "--snapshot", path); code != 1 || !strings.Contains(errOut, `spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be 0 or more`) {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

// spotter plan warns of workloads that spread over zones without
// minDomains, in the table and in the JSON summary, named by their
// Deployment; one with minDomains is not named.
func TestPlanWarnsOfSpreadWithoutMinDomains(t *testing.T) {
	spread := func(app, extra string) string {
		return "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule" + extra +
			", labelSelector: {matchLabels: {app: " + app + "}}}]"
	}
	body := "items:\n" +
		"- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}}\n" +
		"- {apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: web-1, namespace: ns, uid: rs1, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: d1, controller: true}]}, spec: {selector: {matchLabels: {app: web}}}}\n" +
		"- {apiVersion: v1, kind: Pod, metadata: {name: web-1-a, namespace: ns, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-1, uid: rs1, controller: true}]}, " +
		"spec: {nodeName: n1, containers: [{name: c}], " + spread("web", "") + "}, status: {phase: Running}}\n" +
		"- {apiVersion: v1, kind: Pod, metadata: {name: api-a, namespace: ns, labels: {app: api}}, " +
		"spec: {nodeName: n1, containers: [{name: c}], " + spread("api", ", minDomains: 3") + "}, status: {phase: Running}}\n"
	path := filepath.Join(t.TempDir(), "snap.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "1 workload(s) spread over zones (topology.kubernetes.io/zone, DoNotSchedule) without minDomains: ns/web (Deployment)."
	code, out, errOut := run(t, "plan", "--snapshot", path)
	_, warning, _ := strings.Cut(out, "WARNING: ")
	if code != 0 || !strings.HasPrefix(warning, want) || strings.Contains(warning, "ns/api") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, "plan", "--snapshot", path, "-o", "json")
	var p struct {
		Summary struct {
			Warnings []string `json:"warnings"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || len(p.Summary.Warnings) != 1 || !strings.HasPrefix(p.Summary.Warnings[0], want) {
		t.Errorf("json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
}

// spotter plan says why an on-demand node was not consolidated, in the
// table's REASON and as consolidationReason in the JSON: here the node's price
// over its evictions is under the threshold of the configuration.
func TestPlanSaysWhyNotConsolidated(t *testing.T) {
	node := func(name, capacity string) string {
		return "- {apiVersion: v1, kind: Node, metadata: {name: " + name + ", labels: {karpenter.sh/capacity-type: " + capacity +
			", node.kubernetes.io/instance-type: m5.xlarge}}, status: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}}\n"
	}
	pod := func(name, nodeName, extra string) string {
		return "- {apiVersion: v1, kind: Pod, metadata: {name: " + name + ", namespace: ns, annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"}}, spec: {nodeName: " + nodeName + extra +
			", containers: [{name: c, resources: {requests: {cpu: 500m}}}]}, status: {phase: Running}}\n"
	}
	pinned := ", nodeSelector: {karpenter.sh/capacity-type: on-demand}"
	dir := t.TempDir()
	snap, config := filepath.Join(dir, "snap.yaml"), filepath.Join(dir, "spotter.yaml")
	body := "items:\n" + node("od-1", "on-demand") + node("od-2", "on-demand") + node("spot-1", "spot") +
		pod("db-1", "od-1", pinned) + pod("web-1", "od-1", "") + pod("db-2", "od-2", pinned) + pod("web-2", "od-2", "")
	if err := os.WriteFile(snap, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
pricing:
  instanceTypes:
    m5.xlarge: {onDemand: 0.192, spot: 0.07}
planner:
  consolidation:
    minHourlySavingPerEviction: 0.1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "0.192 per hour over 2 evictions is less than planner.consolidation.minHourlySavingPerEviction (0.1) each"
	code, out, errOut := run(t, "plan", "--snapshot", snap, "--config", config)
	if code != 0 || !strings.Contains(out, "; not consolidated: "+want) {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, "plan", "--snapshot", snap, "--config", config, "-o", "json")
	var p struct {
		Nodes []struct {
			Name                string `json:"name"`
			ConsolidationReason string `json:"consolidationReason"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil {
		t.Fatalf("json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	for _, n := range p.Nodes {
		if wantNode := map[bool]string{true: want, false: ""}[strings.HasPrefix(n.Name, "od-")]; n.ConsolidationReason != wantNode {
			t.Errorf("%s: consolidationReason %q, want %q", n.Name, n.ConsolidationReason, wantNode)
		}
	}
}

// A snapshot with no nodes plans nothing: a warning that says so, an error
// with --strict.
func TestPlanSaysTheSnapshotHoldsNoNodes(t *testing.T) {
	path := writeFile(t, "apiVersion: v1\nkind: List\nitems: []\n")
	code, out, errOut := run(t, "plan", "--snapshot", path)
	if code != 0 || !strings.Contains(errOut, "warning: snapshot "+path+" holds no nodes: nothing to plan") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = run(t, "plan", "--snapshot", path, "--strict")
	if code != 1 || !strings.Contains(errOut, "snapshot "+path+" holds no nodes") || out != "" {
		t.Errorf("--strict: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
