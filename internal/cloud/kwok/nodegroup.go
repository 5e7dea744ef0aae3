package kwok

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/lab"
)

// NodeGroup is one of the kwok provider's node groups. It implements
// cloud.NodeGroup; Capacity and Unfulfilled are for tests and the lab.
type NodeGroup struct {
	p        *Provider
	cfg      NodeGroupConfig
	template *corev1.Node

	trace            *Trace
	traceStart       time.Time
	traceNodes, full int

	// Guarded by p.mu.
	nodes    map[string]time.Time // node name -> creation time
	requests []request            // unfulfilled, oldest first
	seq      int
}

// request is an instance asked for and not yet created.
type request struct {
	id int
	at time.Time // when it was asked for
	// err says why it is late once its delay has passed.
	err error
}

func newNodeGroup(p *Provider, cfg NodeGroupConfig, now time.Time) (*NodeGroup, error) {
	g := &NodeGroup{p: p, cfg: cfg, nodes: map[string]time.Time{}}
	g.template = g.newNode(cfg.ID + "-template")
	g.template.Spec.ProviderID = ""
	if t := cfg.Trace; t != nil {
		trace, err := LoadTrace(t.Path)
		if err != nil {
			return nil, err
		}
		g.trace, g.traceNodes, g.full = trace, t.Nodes, t.ScaleTo
		g.traceStart = now.Add(-t.Offset.Duration)
		if g.traceNodes == 0 {
			g.traceNodes = max(trace.Max(), 1)
		}
		if g.full == 0 {
			g.full = cfg.MaxSize
		}
	}
	// The initial size is due at once.
	for range max(cfg.InitialSize, cfg.MinSize) {
		g.request(now.Add(-cfg.ProvisioningDelay.Duration))
	}
	return g, nil
}

// newNode returns the group's Node called name: a kwok node (lab.Node) with the
// group's capacity type, labels, taints, capacity and provider ID.
func (g *NodeGroup) newNode(name string) *corev1.Node {
	class := lab.ClassOnDemand
	if g.cfg.Spot {
		class = lab.ClassSpot
	}
	labels := maps.Clone(g.cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[NodeGroupLabel] = g.cfg.ID
	return lab.Node(lab.NodeSpec{
		Name:         name,
		Class:        class,
		CPU:          g.cfg.CPU,
		Memory:       g.cfg.Memory,
		Pods:         g.cfg.Pods,
		Zone:         g.cfg.Zone,
		InstanceType: g.cfg.InstanceType,
		Labels:       labels,
		Taints:       g.cfg.Taints,
		ProviderID:   providerID(g.cfg.ID, name),
	})
}

// request adds an unfulfilled request made at t. Callers hold p.mu.
func (g *NodeGroup) request(t time.Time) {
	g.seq++
	g.requests = append(g.requests, request{id: g.seq, at: t})
}

// capacityAt returns how many nodes the group may have at t, and whether there
// is a limit at all.
func (g *NodeGroup) capacityAt(t time.Time) (int, bool) {
	limit, limited := 0, false
	if g.cfg.CapacityLimit != nil {
		limit, limited = *g.cfg.CapacityLimit, true
	}
	if g.trace != nil {
		v := min(g.trace.At(t.Sub(g.traceStart)), g.traceNodes)
		v = v * g.full / g.traceNodes
		if !limited || v < limit {
			limit = v
		}
		limited = true
	}
	return limit, limited
}

// Capacity returns how many nodes the group may have now (its CapacityLimit
// and its trace's current value, the lower of the two), and whether it is
// limited at all.
func (g *NodeGroup) Capacity() (nodes int, limited bool) {
	return g.capacityAt(g.p.clock.Now())
}

// Unfulfilled returns the number of requests not yet fulfilled, and how many of
// them are held back for lack of capacity.
func (g *NodeGroup) Unfulfilled() (requests, capacityUnavailable int) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	for _, r := range g.requests {
		if cloud.IsCapacityUnavailable(r.err) {
			capacityUnavailable++
		}
	}
	return len(g.requests), capacityUnavailable
}

// reconcile runs one pass at now. Callers hold p.mu.
func (g *NodeGroup) reconcile(ctx context.Context, now time.Time) error {
	log := klog.FromContext(ctx).WithValues("nodeGroup", g.cfg.ID)
	limit, limited := g.capacityAt(now)
	if g.cfg.Preempt && limited && len(g.nodes) > limit {
		for _, name := range g.newest(len(g.nodes) - limit) {
			err := g.p.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("preempting node %s: %w", name, cloud.FromAPIError(err))
			}
			delete(g.nodes, name)
			g.request(now) // the group keeps its target and replaces it when it can
			log.Info("Preempted a node: capacity fell below the node count", "node", name, "capacity", limit)
		}
	}
	delay := g.cfg.ProvisioningDelay.Duration
	for len(g.requests) > 0 {
		r := &g.requests[0]
		if now.Before(r.at.Add(delay)) {
			break // requests are in order: none later is due either
		}
		if limited && len(g.nodes) >= limit {
			err := cloud.NewCapacityUnavailableError(g.cfg.ID,
				fmt.Errorf("capacity is %d nodes and the group has %d", limit, len(g.nodes)))
			held := 0
			for i := range g.requests {
				if r := &g.requests[i]; !now.Before(r.at.Add(delay)) {
					if !cloud.IsCapacityUnavailable(r.err) {
						held++
					}
					r.err = err
				}
			}
			if held > 0 {
				log.Info("Requests held back: no capacity", "requests", held, "capacity", limit, "nodes", len(g.nodes))
			}
			break
		}
		name, err := g.createNode(ctx)
		if err != nil {
			r.err = err
			return err
		}
		g.nodes[name] = now
		g.requests = g.requests[1:]
		log.V(1).Info("Created a node", "node", name)
	}
	return nil
}

// createNode creates a new Node of the group and returns its name.
func (g *NodeGroup) createNode(ctx context.Context) (string, error) {
	for range 3 {
		name := g.cfg.ID + "-" + utilrand.String(5)
		_, err := g.p.client.CoreV1().Nodes().Create(ctx, g.newNode(name), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("creating node %s: %w", name, cloud.FromAPIError(err))
		}
		return name, nil
	}
	return "", fmt.Errorf("creating a node of group %s: three names taken", g.cfg.ID)
}

// newest returns the names of the n most recently created nodes.
func (g *NodeGroup) newest(n int) []string {
	names := g.sortedNodes()
	return names[len(names)-n:]
}

// sortedNodes returns the group's node names, oldest first.
func (g *NodeGroup) sortedNodes() []string {
	names := slices.Collect(maps.Keys(g.nodes))
	slices.SortFunc(names, func(a, b string) int {
		if c := g.nodes[a].Compare(g.nodes[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return names
}

func (g *NodeGroup) target() int { return len(g.nodes) + len(g.requests) }

// ID implements cloud.NodeGroup.
func (g *NodeGroup) ID() string { return g.cfg.ID }

// Spot implements cloud.NodeGroup.
func (g *NodeGroup) Spot() bool { return g.cfg.Spot }

// MinSize implements cloud.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.cfg.MinSize }

// MaxSize implements cloud.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.cfg.MaxSize }

// PricePerHour implements cloud.NodeGroup.
func (g *NodeGroup) PricePerHour() (float64, bool) {
	if g.cfg.PricePerHour == nil {
		return 0, false
	}
	return *g.cfg.PricePerHour, true
}

// TargetSize implements cloud.NodeGroup.
func (g *NodeGroup) TargetSize(context.Context) (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.target(), nil
}

// IncreaseSize implements cloud.NodeGroup: it adds delta requests, fulfilled
// after the provisioning delay while capacity allows.
func (g *NodeGroup) IncreaseSize(_ context.Context, delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if delta <= 0 {
		return fmt.Errorf("node group %s: increase by %d: %w", g.cfg.ID, delta, cloud.ErrInvalidDelta)
	}
	if t := g.target(); t+delta > g.cfg.MaxSize {
		return fmt.Errorf("node group %s: target %d + %d > max %d: %w", g.cfg.ID, t, delta, g.cfg.MaxSize, cloud.ErrAboveMaxSize)
	}
	now := g.p.clock.Now()
	for range delta {
		g.request(now)
	}
	g.p.poke()
	return nil
}

// DecreaseTargetSize implements cloud.NodeGroup: it cancels the delta newest
// unfulfilled requests.
func (g *NodeGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	switch t := g.target(); {
	case delta <= 0:
		return fmt.Errorf("node group %s: decrease by %d: %w", g.cfg.ID, delta, cloud.ErrInvalidDelta)
	case delta > len(g.requests):
		return fmt.Errorf("node group %s: cancel %d, %d unfulfilled: %w", g.cfg.ID, delta, len(g.requests), cloud.ErrNotUnfulfilled)
	case t-delta < g.cfg.MinSize:
		return fmt.Errorf("node group %s: target %d - %d < min %d: %w", g.cfg.ID, t, delta, g.cfg.MinSize, cloud.ErrBelowMinSize)
	}
	g.requests = g.requests[:len(g.requests)-delta]
	return nil
}

// DeleteNodes implements cloud.NodeGroup: it deletes the Nodes and lowers the
// target by as many. A node the group does not have (any more) is a
// *cloud.NotFoundError, and nothing is deleted.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	names := map[string]bool{}
	for _, n := range nodes {
		if err := cloud.CheckDeletable(n); err != nil {
			return err
		}
		if n.Labels[NodeGroupLabel] != g.cfg.ID {
			return fmt.Errorf("node group %s: node %s: %w", g.cfg.ID, n.Name, cloud.ErrNotInNodeGroup)
		}
		if err := g.known(ctx, n.Name); err != nil {
			return err
		}
		names[n.Name] = true
	}
	if t := g.target(); t-len(names) < g.cfg.MinSize {
		return fmt.Errorf("node group %s: target %d - %d < min %d: %w", g.cfg.ID, t, len(names), g.cfg.MinSize, cloud.ErrBelowMinSize)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		err := g.p.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node group %s: deleting node %s: %w", g.cfg.ID, name, cloud.FromAPIError(err))
		}
		delete(g.nodes, name)
	}
	return nil
}

// known makes sure the group has the node called name: one it created or
// adopted, or, when Start has not adopted it yet, one that exists with the
// group's label (it is adopted now). A node that does not exist is a
// *cloud.NotFoundError. Callers hold p.mu.
func (g *NodeGroup) known(ctx context.Context, name string) error {
	if _, ok := g.nodes[name]; ok {
		return nil
	}
	live, err := g.p.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && live.DeletionTimestamp != nil):
		return cloud.NewNotFoundError(fmt.Errorf("node group %s has no node %s", g.cfg.ID, name))
	case err != nil:
		return fmt.Errorf("node group %s: getting node %s: %w", g.cfg.ID, name, cloud.FromAPIError(err))
	case live.Labels[NodeGroupLabel] != g.cfg.ID:
		return fmt.Errorf("node group %s: node %s: %w", g.cfg.ID, name, cloud.ErrNotInNodeGroup)
	}
	g.nodes[name] = live.CreationTimestamp.Time
	return nil
}

// TemplateNode implements cloud.NodeGroup: the Node the group creates, called
// <id>-template, without a provider ID.
func (g *NodeGroup) TemplateNode(context.Context) (*corev1.Node, error) {
	return g.template.DeepCopy(), nil
}

// Nodes implements cloud.NodeGroup: the group's nodes, oldest first, then its
// unfulfilled requests (InstanceCreating, ID kwok://<group>/request-<n>, with
// a *cloud.CapacityUnavailableError once capacity holds them back).
func (g *NodeGroup) Nodes(context.Context) ([]cloud.Instance, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	out := make([]cloud.Instance, 0, g.target())
	for _, name := range g.sortedNodes() {
		out = append(out, g.instance(name))
	}
	for _, r := range g.requests {
		inst := g.instance("")
		inst.ID = providerID(g.cfg.ID, fmt.Sprintf("request-%d", r.id))
		inst.State = cloud.InstanceCreating
		inst.Err = r.err
		out = append(out, inst)
	}
	return out, nil
}

// instance describes the group's node called name ("" for a request).
func (g *NodeGroup) instance(name string) cloud.Instance {
	inst := cloud.Instance{
		NodeName:     name,
		NodeGroup:    g.cfg.ID,
		Spot:         g.cfg.Spot,
		InstanceType: g.template.Labels[lab.InstanceTypeLabel],
		Zone:         g.template.Labels[lab.ZoneLabel],
		State:        cloud.InstanceRunning,
	}
	if name != "" {
		inst.ID = providerID(g.cfg.ID, name)
	}
	inst.PricePerHour, inst.PriceKnown = g.PricePerHour()
	return inst
}
