// Package kubernetes is the cloud.Provider that knows only what Node objects
// say: spot or on-demand from their labels (the rules of internal/classify),
// instance type and zone from the well-known labels, prices from Spotter's
// pricing configuration. It has no node groups; deleting an instance deletes
// the Node object, and whatever runs the machine (a cloud controller manager,
// an autoscaler, a human) is expected to remove it. It makes no call besides
// that Delete.
package kubernetes

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ProviderName is the provider's Name.
const ProviderName = "kubernetes"

// Well-known labels the provider reads.
const (
	InstanceTypeLabel = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	ZoneLabel         = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
)

// Provider is the labels-only provider. Build it with New.
type Provider struct {
	client     kubernetes.Interface
	classifier *classify.Classifier
	pricing    v1alpha1.PricingConfig
}

var _ cloud.Provider = (*Provider)(nil)

// New returns a provider that deletes Nodes through client and reads the
// capacity type of nodes with the spot and on-demand selectors of
// classification (on top of the well-known labels) and prices from pricing.
// Exclusion does not hide a node's capacity type here: excluded and
// control-plane nodes get an answer too, and the callers, which classify
// nodes themselves, leave them alone.
func New(client kubernetes.Interface, classification v1alpha1.ClassificationConfig, pricing v1alpha1.PricingConfig) (*Provider, error) {
	c, err := classify.New(v1alpha1.ClassificationConfig{
		SpotSelectors:     classification.SpotSelectors,
		OnDemandSelectors: classification.OnDemandSelectors,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider: %w", err)
	}
	return &Provider{client: client, classifier: c, pricing: pricing}, nil
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// Instances implements cloud.Provider from the nodes' labels, without any API
// call. A node whose labels do not say spot or on-demand (or say both) is
// absent. The ID is the node's spec.providerID, or its name when it has none.
// The price is the pricing configuration's spot or on-demand price of the
// node's instance type; a price of 0 counts as not configured.
func (p *Provider) Instances(_ context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	out := make(map[string]cloud.Instance, len(nodes))
	for _, n := range nodes {
		spot, ok := p.spot(n)
		if !ok {
			continue
		}
		inst := cloud.Instance{
			ID:           n.Spec.ProviderID,
			NodeName:     n.Name,
			Spot:         spot,
			InstanceType: n.Labels[InstanceTypeLabel],
			Zone:         n.Labels[ZoneLabel],
			State:        cloud.InstanceRunning,
		}
		if inst.ID == "" {
			inst.ID = n.Name
		}
		if n.DeletionTimestamp != nil {
			inst.State = cloud.InstanceDeleting
		}
		if price, ok := p.pricing.InstanceTypes[inst.InstanceType]; ok {
			inst.PricePerHour = price.OnDemand
			if spot {
				inst.PricePerHour = price.Spot
			}
			inst.PriceKnown = inst.PricePerHour > 0
		}
		out[n.Name] = inst
	}
	return out, nil
}

// spot tells whether node is spot, and whether its labels say at all. Control
// plane and exclusion come first in classification and would hide the
// capacity type; they are taken off a copy of the node first.
func (p *Provider) spot(node *corev1.Node) (spot, known bool) {
	r := p.classifier.Classify(node)
	if r.Class == classify.ControlPlane || r.Class == classify.Excluded {
		r = p.classifier.Classify(capacityOnly(node))
	}
	switch r.Class {
	case classify.Spot:
		return true, true
	case classify.OnDemand:
		return false, true
	}
	return false, false
}

// capacityOnly returns a copy of node without what makes it control plane or
// excluded.
func capacityOnly(node *corev1.Node) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: map[string]string{}}}
	for k, v := range node.Labels {
		switch k {
		case classify.ControlPlaneLabel, classify.MasterLabel, classify.ExcludeLabel:
		default:
			n.Labels[k] = v
		}
	}
	n.Spec.Taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return t.Key == classify.ControlPlaneLabel || t.Key == classify.MasterLabel
	})
	return n
}

// DeleteInstance implements cloud.Provider: it deletes the Node object, on the
// condition that it is still the same object (same UID) when node has one. A
// control-plane node is refused with a *cloud.ControlPlaneError; a node that is
// gone, or replaced by another of the same name, is a *cloud.NotFoundError.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if node.UID != "" {
		opts.Preconditions = metav1.NewUIDPreconditions(string(node.UID))
	}
	err := p.client.CoreV1().Nodes().Delete(ctx, node.Name, opts)
	if apierrors.IsConflict(err) {
		return cloud.NewNotFoundError(fmt.Errorf("node %s was replaced: %w", node.Name, err))
	}
	if err != nil {
		return fmt.Errorf("deleting node %s: %w", node.Name, cloud.FromAPIError(err))
	}
	return nil
}

// NodeGroups implements cloud.Provider: there are none.
func (p *Provider) NodeGroups(context.Context) ([]cloud.NodeGroup, error) { return nil, nil }

// NodeGroupForNode implements cloud.Provider: always a *cloud.NotFoundError.
func (p *Provider) NodeGroupForNode(_ context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	return nil, cloud.NewNotFoundError(fmt.Errorf("node %s: the kubernetes provider has no node groups", node.Name))
}
