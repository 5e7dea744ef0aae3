package cloud_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/testutil"
)

const controlPlaneKey = "node-role.kubernetes.io/control-plane"

func TestValidateNodeGroup(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		spot     bool
		template *corev1.Node
		refused  bool
	}{
		{name: "spot workers", spot: true, template: testutil.Node("t", testutil.Spot())},
		{name: "on-demand control plane", template: testutil.Node("t", testutil.OnDemand(), testutil.NodeLabel(controlPlaneKey, ""))},
		{name: "spot group, control-plane label", spot: true, template: testutil.Node("t", testutil.NodeLabel(controlPlaneKey, "")), refused: true},
		{name: "spot group, control-plane taint", spot: true, template: testutil.Node("t", testutil.Taint(controlPlaneKey, "", corev1.TaintEffectNoSchedule)), refused: true},
		{name: "spot group, legacy master label", spot: true, template: testutil.Node("t", testutil.NodeLabel("node-role.kubernetes.io/master", "")), refused: true},
		{name: "on-demand group, control plane labelled spot", template: testutil.Node("t", testutil.Spot(), testutil.NodeLabel(controlPlaneKey, "")), refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fake.NewNodeGroup("g", tc.spot, 0, 3)
			g.SetTemplate(tc.template)
			err := cloud.ValidateNodeGroup(ctx, g)
			if got := cloud.IsControlPlane(err); got != tc.refused {
				t.Errorf("ValidateNodeGroup = %v; refused %v, want %v", err, got, tc.refused)
			}
		})
	}
}

func TestUsableNodeGroups(t *testing.T) {
	ctx := context.Background()
	p := fake.New("")
	ok := fake.NewNodeGroup("spot-ok", true, 0, 3)
	bad := fake.NewNodeGroup("spot-cp", true, 0, 3)
	bad.SetTemplate(testutil.Node("t", testutil.NodeLabel(controlPlaneKey, "")))
	broken := fake.NewNodeGroup("spot-broken", true, 0, 3)
	broken.SetNextError(fake.TemplateNode, cloud.NewThrottledError(errors.New("slow down"), 0))
	p.AddNodeGroup(ok)
	p.AddNodeGroup(bad)
	p.AddNodeGroup(broken)

	usable, refused, err := cloud.UsableNodeGroups(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(usable) != 1 || usable[0].ID() != "spot-ok" {
		t.Errorf("usable = %v, want spot-ok only", usable)
	}
	if len(refused) != 2 || !cloud.IsControlPlane(refused[0]) || !cloud.IsThrottled(refused[1]) {
		t.Errorf("refused = %v, want a control-plane refusal and a throttled template", refused)
	}

	p.SetNextError(fake.NodeGroups, errors.New("down"))
	if _, _, err := cloud.UsableNodeGroups(ctx, p); err == nil {
		t.Error("no error when the groups cannot be listed")
	}
}

func TestValidateInstance(t *testing.T) {
	cp := testutil.Node("cp", testutil.NodeLabel(controlPlaneKey, ""))
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		inst    *cloud.Instance
		refused bool
	}{
		{name: "spot worker", node: testutil.Node("w", testutil.Spot()), inst: &cloud.Instance{Spot: true}},
		{name: "control plane, on-demand instance", node: cp, inst: &cloud.Instance{}},
		{name: "control plane, no instance data", node: cp},
		{name: "control plane, spot instance", node: cp, inst: &cloud.Instance{ID: "i-1", Spot: true}, refused: true},
		{name: "control plane labelled spot", node: testutil.Node("cp", testutil.Spot(), testutil.NodeLabel(controlPlaneKey, "")), refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cloud.ValidateInstance(tc.node, tc.inst)
			if got := cloud.IsControlPlane(err); got != tc.refused {
				t.Errorf("ValidateInstance = %v, refused %v, want %v", err, got, tc.refused)
			}
		})
	}
}

func TestCheckDeletable(t *testing.T) {
	if err := cloud.CheckDeletable(testutil.Node("w", testutil.OnDemand())); err != nil {
		t.Errorf("worker: %v", err)
	}
	err := cloud.CheckDeletable(testutil.Node("cp", testutil.Taint(controlPlaneKey, "", corev1.TaintEffectNoSchedule)))
	if !cloud.IsControlPlane(err) {
		t.Errorf("control plane: %v", err)
	}
}
