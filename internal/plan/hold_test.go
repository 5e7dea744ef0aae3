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
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// A voluntary eviction waits while another pod of one of its budgets, not
// terminating, is on a node under a termination notice that keeps pods off
// (NoSchedule); nothing else holds it. A fed Resident learns of the notice
// from Invalidate, and of the sibling's eviction from PodChanged.
func TestHoldForNotices(t *testing.T) {
	ctx := context.Background()
	// web-1 on od-1 is the pod to evict; web-2 (labelled siblingLabel) is on
	// spot-1, which has the notice taint of kind and effect when kind is set.
	type cluster struct {
		kind         notice.Kind
		effect       corev1.TaintEffect
		siblingLabel string
		terminating  bool
		budgets      []*policyv1.PodDisruptionBudget
	}
	build := func(c cluster) *snapshot.Snapshot {
		spotOpts := []tu.NodeOption{tu.Spot(), tu.Capacity("4", "8Gi")}
		if c.kind != "" {
			spotOpts = append(spotOpts, tu.Taint(interrupt.TaintKey, string(c.kind), c.effect))
		}
		sibling := pod("web-2", "spot-1", "100m", tu.WithLabels("app", c.siblingLabel))
		if c.terminating {
			sibling.DeletionTimestamp = &metav1.Time{}
		}
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{tu.Node("od-1", tu.OnDemand(), tu.Capacity("4", "8Gi")), tu.Node("spot-1", spotOpts...),
				tu.Node("spot-2", tu.Spot(), tu.Capacity("4", "8Gi"))},
			Pods: []*corev1.Pod{pod("web-1", "od-1", "100m", tu.WithLabels("app", "web")), sibling},
			PDBs: c.budgets,
		}
	}
	web := []*policyv1.PodDisruptionBudget{pdb("web", "web", 1)}
	term, noSchedule := notice.Termination, corev1.TaintEffectNoSchedule
	for _, tc := range []struct {
		name string
		c    cluster
		// ask is the index of the pod asked about (web-1 unless set).
		ask  int
		hold bool
	}{
		{name: "a sibling on a node under a termination notice", c: cluster{term, noSchedule, "web", false, web}, hold: true},
		{name: "the notice only advises (PreferNoSchedule)", c: cluster{term, corev1.TaintEffectPreferNoSchedule, "web", false, web}},
		{name: "a rebalance notice: the node may stay for hours", c: cluster{notice.Rebalance, noSchedule, "web", false, web}},
		{name: "a maintenance notice", c: cluster{notice.Maintenance, noSchedule, "web", false, web}},
		{name: "no notice", c: cluster{siblingLabel: "web", budgets: web}},
		{name: "the sibling is terminating: the agent evicted it", c: cluster{term, noSchedule, "web", true, web}},
		{name: "the pod on the node under notice is under another budget", c: cluster{term, noSchedule, "api", false, append(web, pdb("api", "api", 1))}},
		{name: "no budget", c: cluster{term, noSchedule, "web", false, nil}},
		{name: "the pod asked about is the one on the node under notice", c: cluster{term, noSchedule, "web", false, web}, ask: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := build(tc.c)
			hold := New(Options{}).NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil }).HoldForNotices()
			err := hold(ctx, s.Pods[tc.ask])
			if got := errors.Is(err, drain.ErrNotNow); got != tc.hold || !tc.hold && err != nil {
				t.Fatalf("hold: %v, want held %v", err, tc.hold)
			}
			if tc.hold && (!strings.Contains(err.Error(), "web-2") || !strings.Contains(err.Error(), "spot-1") || !strings.Contains(err.Error(), "default/web")) {
				t.Errorf("the hold does not name the pod, its node and the budget: %v", err)
			}
		})
	}

	t.Run("a fed Resident follows the notice and the sibling's eviction", func(t *testing.T) {
		s := build(cluster{siblingLabel: "web", budgets: web})
		r := New(Options{}).NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil })
		r.Fed()
		hold := r.HoldForNotices()
		if err := hold(ctx, s.Pods[0]); err != nil {
			t.Fatalf("held before any notice: %v", err)
		}
		s.Nodes[1] = s.Nodes[1].DeepCopy()
		s.Nodes[1].Spec.Taints = []corev1.Taint{{Key: interrupt.TaintKey, Value: string(notice.Termination), Effect: corev1.TaintEffectNoSchedule}}
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
