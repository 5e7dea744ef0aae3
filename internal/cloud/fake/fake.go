// Package fake is an in-memory cloud.Provider for unit tests, with knobs: a
// one-shot error for the next call of any method (SetNextError), call counters
// (Calls), a record of what was deleted, and Reset. Node groups grow only when
// the test says so (NodeGroup.Fulfill), or report that capacity is unavailable
// (NodeGroup.SetCapacityUnavailable), so a test controls every step of a
// scale-up.
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
)

// Method names a method of cloud.Provider or cloud.NodeGroup, for
// SetNextError and Calls.
type Method string

// Methods of cloud.Provider.
const (
	Instances        Method = "Instances"
	DeleteInstance   Method = "DeleteInstance"
	NodeGroups       Method = "NodeGroups"
	NodeGroupForNode Method = "NodeGroupForNode"
)

// Methods of cloud.NodeGroup.
const (
	TargetSize         Method = "TargetSize"
	IncreaseSize       Method = "IncreaseSize"
	DecreaseTargetSize Method = "DecreaseTargetSize"
	DeleteNodes        Method = "DeleteNodes"
	TemplateNode       Method = "TemplateNode"
	Nodes              Method = "Nodes"
)

// knobs counts calls and holds the next error of each method.
type knobs struct {
	calls map[Method]int
	next  map[Method]error
}

func newKnobs() knobs { return knobs{calls: map[Method]int{}, next: map[Method]error{}} }

// call counts a call of m and returns (and forgets) the error set for it.
func (k *knobs) call(m Method) error {
	k.calls[m]++
	err := k.next[m]
	delete(k.next, m)
	return err
}

// Provider is a fake cloud.Provider. The zero value is not usable; call New.
type Provider struct {
	name string

	mu        sync.Mutex
	knobs     knobs
	instances map[string]cloud.Instance
	groups    []*NodeGroup
	deleted   []string
	leftOut   []cloud.LeftOut
}

var (
	_ cloud.Provider        = (*Provider)(nil)
	_ cloud.LeftOutReporter = (*Provider)(nil)
)

// New returns an empty fake provider called name ("fake" when empty).
func New(name string) *Provider {
	if name == "" {
		name = "fake"
	}
	p := &Provider{name: name}
	p.Reset()
	return p
}

// Reset makes p as New returned it: no instances, no node groups, no calls
// counted, no errors pending, nothing deleted.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.knobs = newKnobs()
	p.instances = map[string]cloud.Instance{}
	p.groups = nil
	p.deleted = nil
}

// SetInstance makes Instances answer inst for the node called nodeName (outside
// any node group; nodes of node groups are known through their group).
func (p *Provider) SetInstance(nodeName string, inst cloud.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inst.NodeName == "" {
		inst.NodeName = nodeName
	}
	if inst.State == "" {
		inst.State = cloud.InstanceRunning
	}
	p.instances[nodeName] = inst
}

// SetLeftOut sets the groups LeftOut reports as left out of NodeGroups.
func (p *Provider) SetLeftOut(l ...cloud.LeftOut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leftOut = slices.Clone(l)
}

// LeftOut implements cloud.LeftOutReporter: what SetLeftOut set.
func (p *Provider) LeftOut() []cloud.LeftOut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leftOut)
}

// AddNodeGroup adds g to the groups NodeGroups lists, after those added before.
func (p *Provider) AddNodeGroup(g *NodeGroup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = append(p.groups, g)
}

// SetNextError makes the next call of the provider method m return err (once).
func (p *Provider) SetNextError(m Method, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.knobs.next[m] = err
}

// Calls returns how many times the provider method m was called since New or
// Reset, including calls that failed.
func (p *Provider) Calls(m Method) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.knobs.calls[m]
}

// DeletedInstances returns the names of the nodes whose instances
// DeleteInstance deleted, in order.
func (p *Provider) DeletedInstances() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.deleted)
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return p.name }

// Instances implements cloud.Provider: instances set with SetInstance and the
// running nodes of the node groups.
func (p *Provider) Instances(_ context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.knobs.call(Instances); err != nil {
		return nil, err
	}
	out := map[string]cloud.Instance{}
	for _, n := range nodes {
		if inst, ok := p.instances[n.Name]; ok {
			out[n.Name] = inst
			continue
		}
		for _, g := range p.groups {
			if inst, ok := g.instance(n.Name); ok {
				out[n.Name] = inst
				break
			}
		}
	}
	return out, nil
}

// DeleteInstance implements cloud.Provider: a node of a node group goes through
// the group's DeleteNodes; another known instance is forgotten.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.knobs.call(DeleteInstance); err != nil {
		return err
	}
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	if g := p.groupOf(node.Name); g != nil {
		if err := g.DeleteNodes(ctx, []*corev1.Node{node}); err != nil {
			return err
		}
		p.deleted = append(p.deleted, node.Name)
		return nil
	}
	if _, ok := p.instances[node.Name]; !ok {
		return cloud.NewNotFoundError(fmt.Errorf("no instance for node %s", node.Name))
	}
	delete(p.instances, node.Name)
	p.deleted = append(p.deleted, node.Name)
	return nil
}

// NodeGroups implements cloud.Provider.
func (p *Provider) NodeGroups(context.Context) ([]cloud.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.knobs.call(NodeGroups); err != nil {
		return nil, err
	}
	out := make([]cloud.NodeGroup, 0, len(p.groups))
	for _, g := range p.groups {
		out = append(out, g)
	}
	return out, nil
}

// NodeGroupForNode implements cloud.Provider: the group that has a running
// instance for node.
func (p *Provider) NodeGroupForNode(_ context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.knobs.call(NodeGroupForNode); err != nil {
		return nil, err
	}
	if g := p.groupOf(node.Name); g != nil {
		return g, nil
	}
	return nil, cloud.NewNotFoundError(fmt.Errorf("node %s is in no node group", node.Name))
}

func (p *Provider) groupOf(nodeName string) *NodeGroup {
	for _, g := range p.groups {
		if _, ok := g.instance(nodeName); ok {
			return g
		}
	}
	return nil
}
