package world

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
)

// Provider is the world's node groups as a cloud.Provider: what the
// migrator, built as `spotter controller` builds it, scales and deletes in
// the simulator. When its zone's market cannot hold the new nodes now, a spot
// group's increase is refused at once, with a *cloud.CapacityUnavailableError,
// or, where the scenario has the cloud report stock-outs late, accepted: the
// nodes the market holds launch, and the rest are listed as requests not yet
// fulfilled (InstanceCreating) which, once the stock-out is reported, carry
// the capacity error (Instance.Err), as the AWS and GCP providers list the
// instances a failed scaling activity or creation left unfulfilled. Nodes
// launched wait ProvisioningTime before they register.
type Provider struct{ w *World }

var _ cloud.Provider = Provider{}

// NewProvider is the cloud provider of the world's node groups.
func NewProvider(w *World) Provider { return Provider{w} }

// Name names the provider in the product's logs and errors.
func (p Provider) Name() string { return "simulator" }

// Instances answers for the world's nodes, with their groups' prices now.
func (p Provider) Instances(_ context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for _, node := range nodes {
		if n := p.w.NodeByName(node.Name); n != nil {
			out[node.Name] = p.instance(n)
		}
	}
	return out, nil
}

func (p Provider) instance(n *Node) cloud.Instance {
	inst := cloud.Instance{ID: "sim://" + n.Group.Name + "/" + n.Name, NodeGroup: n.Group.Name, Spot: n.Group.Spot,
		InstanceType: n.Group.InstanceType, Zone: n.Group.Zone, PricePerHour: p.w.PricePerHour(n.Group), PriceKnown: true,
		State: cloud.InstanceRunning}
	if n.Ready() {
		inst.NodeName = n.Name
		return inst
	}
	inst.State = cloud.InstanceCreating
	if _, failed := n.Unfulfilled(p.w.Now()); failed {
		inst.Err = cloud.NewCapacityUnavailableError(n.Group.Name, ErrNoCapacity)
	}
	return inst
}

// DeleteInstance terminates a node's instance and takes it out of its group.
func (p Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	g, err := p.NodeGroupForNode(ctx, node)
	if err != nil {
		return err
	}
	return g.DeleteNodes(ctx, []*corev1.Node{node})
}

// NodeGroups are the world's node groups.
func (p Provider) NodeGroups(context.Context) ([]cloud.NodeGroup, error) {
	out := make([]cloud.NodeGroup, 0, len(p.w.Groups))
	for _, g := range p.w.Groups {
		out = append(out, group{p.w, g})
	}
	return out, nil
}

// NodeGroupForNode is the group a node was launched in.
func (p Provider) NodeGroupForNode(_ context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	n := p.w.NodeByName(node.Name)
	if n == nil {
		return nil, cloud.NewNotFoundError(fmt.Errorf("node %s is not a node of the simulated cluster", node.Name))
	}
	return group{p.w, n.Group}, nil
}

// group is a node group of the world.
type group struct {
	w *World
	g *Group
}

func (g group) ID() string   { return g.g.Name }
func (g group) Spot() bool   { return g.g.Spot }
func (g group) MinSize() int { return int(g.g.Min) }
func (g group) MaxSize() int { return int(g.g.Max) }

// TargetSize counts the group's nodes, those still provisioning included.
func (g group) TargetSize(context.Context) (int, error) { return g.g.count, nil }

func (g group) PricePerHour() (float64, bool) { return g.w.PricePerHour(g.g), true }

func (g group) IncreaseSize(_ context.Context, delta int) error {
	if delta <= 0 {
		return cloud.ErrInvalidDelta
	}
	if g.g.count+delta > int(g.g.Max) {
		return fmt.Errorf("node group %s: %d more nodes: %w", g.g.Name, delta, cloud.ErrAboveMaxSize)
	}
	if g.g.Spot && g.g.zone.StockOutDelay == 0 && g.w.spotNodes(g.g.zone)+delta > g.g.zone.Capacity(g.w.Elapsed()) {
		return cloud.NewCapacityUnavailableError(g.g.Name, ErrNoCapacity)
	}
	for range delta {
		if _, err := g.w.Launch(g.g); err != nil {
			return err
		}
	}
	return nil
}

// DecreaseTargetSize cancels requests not yet fulfilled: those the market
// could not hold first, then the newest nodes still provisioning.
func (g group) DecreaseTargetSize(_ context.Context, delta int) error {
	if delta <= 0 {
		return cloud.ErrInvalidDelta
	}
	var waiting []*Node
	for _, n := range g.w.nodes {
		if n.Group == g.g && n.state == provisioning {
			waiting = append(waiting, n)
		}
	}
	for _, n := range g.w.nodes {
		if n.Group == g.g && n.state == unfulfilled {
			waiting = append(waiting, n)
		}
	}
	if len(waiting) < delta {
		return fmt.Errorf("node group %s: %d to cancel, %d provisioning: %w", g.g.Name, delta, len(waiting), cloud.ErrNotUnfulfilled)
	}
	if g.g.count-delta < int(g.g.Min) {
		return fmt.Errorf("node group %s: %w", g.g.Name, cloud.ErrBelowMinSize)
	}
	slices.Reverse(waiting)
	for _, n := range waiting[:delta] {
		g.w.DeleteNode(n)
	}
	return nil
}

func (g group) DeleteNodes(_ context.Context, nodes []*corev1.Node) error {
	var del []*Node
	for _, node := range nodes {
		n := g.w.NodeByName(node.Name)
		if n == nil || n.Group != g.g {
			return fmt.Errorf("node %s, node group %s: %w", node.Name, g.g.Name, cloud.ErrNotInNodeGroup)
		}
		del = append(del, n)
	}
	if g.g.count-len(del) < int(g.g.Min) {
		return fmt.Errorf("node group %s: %w", g.g.Name, cloud.ErrBelowMinSize)
	}
	for _, n := range del {
		g.w.DeleteNode(n)
	}
	return nil
}

// TemplateNode is the object a new node of the group will have.
func (g group) TemplateNode(context.Context) (*corev1.Node, error) {
	return g.w.nodeObject(&Node{Name: "template-" + g.g.Name, Group: g.g, Created: g.w.Now()}), nil
}

func (g group) Nodes(context.Context) ([]cloud.Instance, error) {
	var out []cloud.Instance
	for _, n := range g.w.nodes {
		if n.Group == g.g {
			out = append(out, Provider{g.w}.instance(n))
		}
	}
	return out, nil
}
