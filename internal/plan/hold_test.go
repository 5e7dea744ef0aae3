package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// A voluntary eviction waits while another pod of one of its budgets, not
// terminating, is on a node under a notice that keeps pods off (NoSchedule);
// nothing else holds it. A fed Resident learns of the notice from
// Invalidate, and of the sibling's eviction from PodChanged.
func TestHoldForNotices(t *testing.T) {
	ctx := context.Background()
	cluster := func(effect corev1.TaintEffect, siblingLabel string, terminating bool, budgets ...*policyv1.PodDisruptionBudget) *snapshot.Snapshot {
		spotOpts := []tu.NodeOption{tu.Spot(), tu.Capacity("4", "8Gi")}
		if effect != "" {
			spotOpts = append(spotOpts, tu.Taint(interrupt.TaintKey, "termination", effect))
		}
		sibling := pod("web-2", "spot-1", "100m", tu.WithLabels("app", siblingLabel))
		if terminating {
			sibling.DeletionTimestamp = &metav1.Time{}
		}
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand(), tu.Capacity("4", "8Gi")), tu.Node("spot-1", spotOpts...),
				tu.Node("spot-2", tu.Spot(), tu.Capacity("4", "8Gi"))},
			Pods: []*corev1.Pod{pod("web-1", "od-1", "100m", tu.WithLabels("app", "web")), sibling},
			PDBs: budgets,
		}
	}
	webPDB := pdb("web", "web", 1)
	for _, tc := range []struct {
		name string
		s    *snapshot.Snapshot
		hold bool
	}{
		{"a sibling on a node under a termination notice", cluster(corev1.TaintEffectNoSchedule, "web", false, webPDB), true},
		{"the notice only advises (PreferNoSchedule)", cluster(corev1.TaintEffectPreferNoSchedule, "web", false, webPDB), false},
		{"no notice", cluster("", "web", false, webPDB), false},
		{"the sibling is terminating: the agent evicted it", cluster(corev1.TaintEffectNoSchedule, "web", true, webPDB), false},
		{"the pod on the node under notice is under another budget", cluster(corev1.TaintEffectNoSchedule, "api", false, webPDB, pdb("api", "api", 1)), false},
		{"no budget", cluster(corev1.TaintEffectNoSchedule, "web", false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			hold := New(Options{}).NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil }).HoldForNotices()
			err := hold(ctx, s.Pods[0])
			if got := errors.Is(err, drain.ErrNotNow); got != tc.hold || !tc.hold && err != nil {
				t.Fatalf("hold: %v, want held %v", err, tc.hold)
			}
			if tc.hold && (!strings.Contains(err.Error(), "web-2") || !strings.Contains(err.Error(), "spot-1")) {
				t.Errorf("the hold does not name the pod and its node: %v", err)
			}
		})
	}

	t.Run("a fed Resident follows the notice and the sibling's eviction", func(t *testing.T) {
		s := cluster("", "web", false, webPDB)
		r := New(Options{}).NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil })
		r.Fed()
		hold := r.HoldForNotices()
		if err := hold(ctx, s.Pods[0]); err != nil {
			t.Fatalf("held before any notice: %v", err)
		}
		s.Nodes[1] = s.Nodes[1].DeepCopy()
		s.Nodes[1].Spec.Taints = []corev1.Taint{{Key: interrupt.TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule}}
		r.Invalidate()
		if err := hold(ctx, s.Pods[0]); !errors.Is(err, drain.ErrNotNow) {
			t.Fatalf("not held once the notice came: %v", err)
		}
		old := s.Pods[1]
		evicted := old.DeepCopy()
		evicted.DeletionTimestamp = &metav1.Time{}
		s.Pods[1] = evicted
		r.PodChanged(old, evicted)
		if err := hold(ctx, s.Pods[0]); err != nil {
			t.Fatalf("still held once the sibling was evicted: %v", err)
		}
		if st := r.Stats(); st.Builds != 2 {
			t.Errorf("%d builds, want 2 (the pod change is applied, not rebuilt)", st.Builds)
		}
	})
}
