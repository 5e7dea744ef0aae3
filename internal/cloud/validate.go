package cloud

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/classify"
)

// builtin classifies with the built-in rules only: control-plane detection must
// not depend on configuration.
var builtin = &classify.Classifier{}

// controlPlane reports whether node is a control-plane node, why, and, when it
// also looks like spot by its labels, what says so.
func controlPlane(node *corev1.Node) (reason, spotEvidence string, ok bool) {
	r := builtin.Classify(node)
	if r.Class != classify.ControlPlane {
		return "", "", false
	}
	return r.Reason, r.Warning, true
}

// CheckDeletable returns a *ControlPlaneError when node is part of the control
// plane, nil otherwise. Providers call it before deleting anything: Spotter
// never deletes a control-plane node.
func CheckDeletable(node *corev1.Node) error {
	if reason, _, ok := controlPlane(node); ok {
		return &ControlPlaneError{Kind: "node", Name: node.Name, Reason: reason + "; Spotter never deletes it"}
	}
	return nil
}

// ValidateInstance returns a *ControlPlaneError when node is a control-plane
// node running on spot capacity, by inst (when given) or by its own labels.
// Such a node is reported, never used as spot.
func ValidateInstance(node *corev1.Node, inst *Instance) error {
	reason, spotLabel, ok := controlPlane(node)
	if !ok {
		return nil
	}
	switch {
	case inst != nil && inst.Spot:
		return &ControlPlaneError{Kind: "node", Name: node.Name, Reason: fmt.Sprintf("%s, and its instance %s is spot", reason, inst.ID)}
	case spotLabel != "":
		return &ControlPlaneError{Kind: "node", Name: node.Name, Reason: spotLabel}
	}
	return nil
}

// ValidateNodeGroup returns a *ControlPlaneError when g would put the control
// plane on spot: g is spot, or its template looks like spot, and its template
// node is a control-plane node (by label or taint). Other errors come from
// TemplateNode.
func ValidateNodeGroup(ctx context.Context, g NodeGroup) error {
	tmpl, err := g.TemplateNode(ctx)
	if err != nil {
		return fmt.Errorf("template node of node group %s: %w", g.ID(), err)
	}
	reason, spotLabel, ok := controlPlane(tmpl)
	switch {
	case !ok:
		return nil
	case g.Spot():
		return &ControlPlaneError{Kind: "node group", Name: g.ID(), Reason: fmt.Sprintf("spot node group whose nodes have %s", reason)}
	case spotLabel != "":
		return &ControlPlaneError{Kind: "node group", Name: g.ID(), Reason: fmt.Sprintf("template has %s and %s", reason, spotLabel)}
	}
	return nil
}

// ControlPlaneChecker is implemented by providers that can find control
// planes outside their node groups that are set up to run on spot capacity
// (for example a Cluster API KubeadmControlPlane whose machine template asks
// for spot). UsableNodeGroups adds what it finds to its refusals.
type ControlPlaneChecker interface {
	// SpotControlPlanes returns a *ControlPlaneError (Kind KindControlPlane)
	// for each control plane set up to run on spot. An error means the
	// provider could not check.
	SpotControlPlanes(ctx context.Context) ([]*ControlPlaneError, error)
}

// UsableNodeGroups lists p's node groups and splits them into those Spotter may
// scale and, as one error each, those it refuses or could not check: a
// *ControlPlaneError for a group that would put the control plane on spot, the
// TemplateNode error (for example a *ThrottledError) otherwise. When p is a
// ControlPlaneChecker, the control planes it finds on spot are refused too
// (Kind KindControlPlane), and a failed check is one more error. err is set
// only when the groups could not be listed; callers report refused and carry
// on with usable.
func UsableNodeGroups(ctx context.Context, p Provider) (usable []NodeGroup, refused []error, err error) {
	groups, err := p.NodeGroups(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing node groups of %s: %w", p.Name(), err)
	}
	for _, g := range groups {
		if err := ValidateNodeGroup(ctx, g); err != nil {
			refused = append(refused, err)
			continue
		}
		usable = append(usable, g)
	}
	if c, ok := p.(ControlPlaneChecker); ok {
		cps, err := c.SpotControlPlanes(ctx)
		if err != nil {
			refused = append(refused, fmt.Errorf("checking the control planes of %s: %w", p.Name(), err))
		}
		for _, e := range cps {
			refused = append(refused, e)
		}
	}
	return usable, refused, nil
}
