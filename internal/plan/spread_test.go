package plan

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// SpreadWarnings names each workload that spreads over zones without
// minDomains once, by its Deployment when the snapshot has the ReplicaSet;
// minDomains, ScheduleAnyway, other keys and finished pods are not warned of.
func TestSpreadWarnings(t *testing.T) {
	zone := corev1.LabelTopologyZone
	withMin := func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3) }
	soft := func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.ScheduleAnyway }
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-5d8f", UID: "ReplicaSet-web-5d8f",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-web", Controller: ptr.To(true)}}}}
	s := &snapshot.Snapshot{
		Pods: []*corev1.Pod{
			tu.Pod("web-5d8f-a", tu.Spread("web", zone, 1), tu.OwnedBy("ReplicaSet", "web-5d8f")),
			tu.Pod("web-5d8f-b", tu.Spread("web", zone, 1), tu.OwnedBy("ReplicaSet", "web-5d8f")),
			tu.Pod("cache-0", tu.Spread("cache", zone, 1), tu.OwnedBy("StatefulSet", "cache")),
			tu.Pod("loose", tu.Spread("loose", zone, 1)),
			tu.Pod("api-1", tu.Spread("api", zone, 1), withMin, tu.OwnedBy("ReplicaSet", "api-1")),
			tu.Pod("soft-1", tu.Spread("soft", zone, 1), soft, tu.OwnedBy("ReplicaSet", "soft-1")),
			tu.Pod("host-1", tu.Spread("host", corev1.LabelHostname, 1), tu.OwnedBy("ReplicaSet", "host-1")),
			tu.Pod("done-1", tu.Spread("done", zone, 1), tu.Phase(corev1.PodSucceeded), tu.OwnedBy("Job", "done")),
		},
		ReplicaSets: []*appsv1.ReplicaSet{rs},
	}
	got := SpreadWarnings(s)
	if len(got) != 1 {
		t.Fatalf("got %d warnings, want 1: %q", len(got), got)
	}
	want := "3 workload(s) spread over zones (topology.kubernetes.io/zone, DoNotSchedule) without minDomains: " +
		"default/cache (StatefulSet), default/loose (Pod), default/web (Deployment). "
	if !strings.HasPrefix(got[0], want) {
		t.Errorf("warning:\n%s\nwant it to start with\n%s", got[0], want)
	}

	// Many workloads: the first ten by name, and a count of the others.
	s = &snapshot.Snapshot{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		s.Pods = append(s.Pods, tu.Pod(n+"-0", tu.Spread(n, zone, 1), tu.OwnedBy("StatefulSet", n)))
	}
	got = SpreadWarnings(s)
	if len(got) != 1 || !strings.Contains(got[0], "12 workload(s)") || !strings.Contains(got[0], "default/j (StatefulSet) and 2 more.") ||
		strings.Contains(got[0], "default/k ") {
		t.Errorf("warning over 12 workloads: %q", got)
	}

	if got := SpreadWarnings(&snapshot.Snapshot{Pods: []*corev1.Pod{tu.Pod("api-1", tu.Spread("api", zone, 1), withMin)}}); got != nil {
		t.Errorf("warnings with minDomains set: %q", got)
	}
}
