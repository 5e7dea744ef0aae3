package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cloud"
)

// Labels of the default template node.
const (
	capacityTypeLabel = "karpenter.sh/capacity-type"
	instanceTypeLabel = "node.kubernetes.io/instance-type"
	zoneLabel         = "topology.kubernetes.io/zone"
)

// NodeGroup is a fake cloud.NodeGroup. Requests made by IncreaseSize stay
// unfulfilled until the test calls Fulfill. The zero value is not usable; call
// NewNodeGroup.
type NodeGroup struct {
	id       string
	spot     bool
	min, max int

	mu       sync.Mutex
	knobs    knobs
	template *corev1.Node
	price    *float64
	running  []string // node names, in creation order
	pending  int
	seq      int
	capErr   error
	deleted  []string
	// silent are running instances whose Node never registers.
	silent map[string]bool
}

var _ cloud.NodeGroup = (*NodeGroup)(nil)

// NewNodeGroup returns an empty group (target size 0) with the given limits.
// Its template is a 4 CPU, 16Gi node labelled with the group's capacity type
// (karpenter.sh/capacity-type), until SetTemplate changes it.
func NewNodeGroup(id string, spot bool, minSize, maxSize int) *NodeGroup {
	g := &NodeGroup{id: id, spot: spot, min: minSize, max: maxSize, silent: map[string]bool{}}
	g.knobs = newKnobs()
	g.template = defaultTemplate(id, spot)
	return g
}

func defaultTemplate(id string, spot bool) *corev1.Node {
	capacityType := "on-demand"
	if spot {
		capacityType = "spot"
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: id + "-template", Labels: map[string]string{
			capacityTypeLabel: capacityType,
			instanceTypeLabel: "fake.large",
			zoneLabel:         "zone-a",
		}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy()},
	}
}

// Reset empties the group (no instances, no requests), forgets calls, pending
// errors and deletions and makes capacity available again. ID, limits,
// template and price stay.
func (g *NodeGroup) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.knobs = newKnobs()
	g.running, g.pending, g.seq, g.capErr, g.deleted, g.silent = nil, 0, 0, nil, nil, map[string]bool{}
}

// SetTemplate sets the node TemplateNode returns and Fulfill copies.
func (g *NodeGroup) SetTemplate(n *corev1.Node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.template = n.DeepCopy()
}

// SetPrice sets the hourly price PricePerHour reports, and instances carry.
func (g *NodeGroup) SetPrice(price float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.price = &price
}

// SetCapacityUnavailable makes the unfulfilled requests report a
// *cloud.CapacityUnavailableError in Nodes (on) or nothing (off), and makes
// Fulfill deliver nothing while on.
func (g *NodeGroup) SetCapacityUnavailable(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.capErr = nil
	if on {
		g.capErr = cloud.NewCapacityUnavailableError(g.id, errors.New("fake: no capacity"))
	}
}

// SetNextError makes the next call of the node group method m return err
// (once), changing nothing.
func (g *NodeGroup) SetNextError(m Method, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.knobs.next[m] = err
}

// Calls returns how many times the node group method m was called, including
// calls that failed.
func (g *NodeGroup) Calls(m Method) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.knobs.calls[m]
}

// Fulfill turns up to n unfulfilled requests into running instances and
// returns their Node objects (named <id>-1, <id>-2, ..., copied from the
// template, with providerID fake://<id>/<name>), for the test to create in its
// client. It delivers nothing while capacity is unavailable.
func (g *NodeGroup) Fulfill(n int) []*corev1.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.capErr != nil {
		return nil
	}
	var out []*corev1.Node
	for ; n > 0 && g.pending > 0; n-- {
		g.pending--
		g.seq++
		node := g.template.DeepCopy()
		node.Name = fmt.Sprintf("%s-%d", g.id, g.seq)
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels["kubernetes.io/hostname"] = node.Name
		node.Spec.ProviderID = g.providerID(node.Name)
		g.running = append(g.running, node.Name)
		out = append(out, node)
	}
	return out
}

// FulfillSilently turns up to n unfulfilled requests into running instances
// whose Node never registers (NodeName stays empty), and returns their
// provider IDs.
func (g *NodeGroup) FulfillSilently(n int) []string {
	nodes := g.Fulfill(n)
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]string, len(nodes))
	for i, node := range nodes {
		g.silent[node.Name] = true
		ids[i] = node.Spec.ProviderID
	}
	return ids
}

// AddNode makes the node called name a running instance of the group, raising
// the target size by one, as if it had been there from the start.
func (g *NodeGroup) AddNode(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running = append(g.running, name)
}

// Deleted returns the names of the nodes DeleteNodes deleted, in order.
func (g *NodeGroup) Deleted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.deleted)
}

// Unfulfilled returns the number of requests not yet fulfilled.
func (g *NodeGroup) Unfulfilled() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending
}

// ID implements cloud.NodeGroup.
func (g *NodeGroup) ID() string { return g.id }

// Spot implements cloud.NodeGroup.
func (g *NodeGroup) Spot() bool { return g.spot }

// MinSize implements cloud.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloud.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// PricePerHour implements cloud.NodeGroup.
func (g *NodeGroup) PricePerHour() (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.price == nil {
		return 0, false
	}
	return *g.price, true
}

// TargetSize implements cloud.NodeGroup: running instances plus unfulfilled
// requests.
func (g *NodeGroup) TargetSize(context.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(TargetSize); err != nil {
		return 0, err
	}
	return g.target(), nil
}

func (g *NodeGroup) target() int { return len(g.running) + g.pending }

// IncreaseSize implements cloud.NodeGroup: it records delta unfulfilled
// requests.
func (g *NodeGroup) IncreaseSize(_ context.Context, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(IncreaseSize); err != nil {
		return err
	}
	if delta <= 0 {
		return fmt.Errorf("node group %s: increase by %d: %w", g.id, delta, cloud.ErrInvalidDelta)
	}
	if g.target()+delta > g.max {
		return fmt.Errorf("node group %s: target %d + %d > max %d: %w", g.id, g.target(), delta, g.max, cloud.ErrAboveMaxSize)
	}
	g.pending += delta
	return nil
}

// DecreaseTargetSize implements cloud.NodeGroup: it cancels delta unfulfilled
// requests.
func (g *NodeGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(DecreaseTargetSize); err != nil {
		return err
	}
	switch {
	case delta <= 0:
		return fmt.Errorf("node group %s: decrease by %d: %w", g.id, delta, cloud.ErrInvalidDelta)
	case delta > g.pending:
		return fmt.Errorf("node group %s: cancel %d, %d unfulfilled: %w", g.id, delta, g.pending, cloud.ErrNotUnfulfilled)
	case g.target()-delta < g.min:
		return fmt.Errorf("node group %s: target %d - %d < min %d: %w", g.id, g.target(), delta, g.min, cloud.ErrBelowMinSize)
	}
	g.pending -= delta
	return nil
}

// DeleteNodes implements cloud.NodeGroup.
func (g *NodeGroup) DeleteNodes(_ context.Context, nodes []*corev1.Node) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(DeleteNodes); err != nil {
		return err
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		if err := cloud.CheckDeletable(n); err != nil {
			return err
		}
		names[i] = n.Name
		if n.Name == "" { // an instance whose Node never registered
			for _, name := range g.running {
				if g.providerID(name) == n.Spec.ProviderID {
					names[i] = name
				}
			}
		}
		if !slices.Contains(g.running, names[i]) {
			return fmt.Errorf("node group %s: node %s (providerID %q): %w", g.id, n.Name, n.Spec.ProviderID, cloud.ErrNotInNodeGroup)
		}
	}
	if g.target()-len(nodes) < g.min {
		return fmt.Errorf("node group %s: target %d - %d < min %d: %w", g.id, g.target(), len(nodes), g.min, cloud.ErrBelowMinSize)
	}
	for _, name := range names {
		g.running = slices.DeleteFunc(g.running, func(r string) bool { return r == name })
		delete(g.silent, name)
		g.deleted = append(g.deleted, name)
	}
	return nil
}

// TemplateNode implements cloud.NodeGroup.
func (g *NodeGroup) TemplateNode(context.Context) (*corev1.Node, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(TemplateNode); err != nil {
		return nil, err
	}
	return g.template.DeepCopy(), nil
}

// Nodes implements cloud.NodeGroup: running instances, then one
// InstanceCreating per unfulfilled request.
func (g *NodeGroup) Nodes(context.Context) ([]cloud.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.knobs.call(Nodes); err != nil {
		return nil, err
	}
	out := make([]cloud.Instance, 0, g.target())
	for _, name := range g.running {
		inst := g.instanceLocked(name)
		if g.silent[name] {
			inst.NodeName = ""
		}
		out = append(out, inst)
	}
	for i := range g.pending {
		inst := g.instanceLocked("")
		inst.ID = fmt.Sprintf("fake://%s/request-%d", g.id, i+1)
		inst.State = cloud.InstanceCreating
		inst.Err = g.capErr
		out = append(out, inst)
	}
	return out, nil
}

// instance returns the running instance of the node called name, if any.
func (g *NodeGroup) instance(name string) (cloud.Instance, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.running, name) {
		return cloud.Instance{}, false
	}
	return g.instanceLocked(name), true
}

func (g *NodeGroup) instanceLocked(name string) cloud.Instance {
	inst := cloud.Instance{
		ID:           g.providerID(name),
		NodeName:     name,
		NodeGroup:    g.id,
		Spot:         g.spot,
		InstanceType: g.template.Labels[instanceTypeLabel],
		Zone:         g.template.Labels[zoneLabel],
		State:        cloud.InstanceRunning,
	}
	if g.price != nil {
		inst.PricePerHour, inst.PriceKnown = *g.price, true
	}
	return inst
}

func (g *NodeGroup) providerID(name string) string { return fmt.Sprintf("fake://%s/%s", g.id, name) }
