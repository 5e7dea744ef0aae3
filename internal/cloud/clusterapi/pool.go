package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
)

// MachinePools are node groups like MachineDeployments, with two differences
// that this file handles: their instances are listed by the infrastructure
// (spec.providerIDList, copied by Cluster API from the infrastructure machine
// pool, and status.nodeRefs, the Nodes Cluster API matched to them), and they
// have a Machine per instance only when the infrastructure machine pool opts
// in to Cluster API's MachinePool Machines (status.infrastructureMachineKind).
// An instance without a Machine can be looked up, counted and scaled up, never
// deleted on its own: nothing tells the infrastructure which instance to
// remove.

// nodeRef is an entry of a MachinePool's status.nodeRefs.
type nodeRef struct {
	name string
	uid  types.UID
}

// listMachinePools lists the MachinePools in the provider's namespace. None
// when the management cluster does not serve them (Cluster API's MachinePool
// feature gate off) or forbids their List (the permissions of a Spotter
// before MachinePools): node groups of the other kinds go on working, and
// the reason is logged once.
func (p *Provider) listMachinePools(ctx context.Context) ([]unstructured.Unstructured, error) {
	pools, err := p.list(ctx, MachinePoolsGVR)
	switch {
	case cloud.IsNotFound(err):
		p.reportOnce(ctx, "no-machinepools", func(logger klog.Logger) {
			logger.V(1).Info("MachinePools are not served by the management cluster: no MachinePool node groups", "resource", MachinePoolsGVR.String())
		})
		return nil, nil
	case apierrors.IsForbidden(err):
		p.reportOnce(ctx, "machinepools-forbidden", func(logger klog.Logger) {
			logger.Error(err, "MachinePools not read: no MachinePool is a node group until list is granted", "resource", MachinePoolsGVR.GroupResource().String())
		})
		return nil, nil
	}
	return pools, err
}

// readPool reads what a MachinePool has beyond a MachineDeployment.
func (g *NodeGroup) readPool(obj *unstructured.Unstructured) {
	g.providerIDs, _, _ = unstructured.NestedStringSlice(obj.Object, "spec", "providerIDList")
	refs, _, _ := unstructured.NestedSlice(obj.Object, "status", "nodeRefs")
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		name, _ := ref["name"].(string)
		uid, _ := ref["uid"].(string)
		if name != "" {
			g.nodeRefs = append(g.nodeRefs, nodeRef{name: name, uid: types.UID(uid)})
		}
	}
	if g.failureDomain == "" {
		if fds, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "failureDomains"); len(fds) == 1 {
			g.failureDomain = fds[0]
		}
	}
}

// indexPoolInstances records the instances of each MachinePool node group
// that have no Machine (all of them, when the infrastructure makes none),
// after the Machines are indexed: they are found by providerID as Machines
// are.
func (s *state) indexPoolInstances() {
	for _, g := range s.groups {
		if g.kind != KindMachinePool {
			continue
		}
		for _, id := range g.providerIDs {
			if id == "" {
				continue
			}
			if m := s.byProviderID[id]; m != nil && m.group == g {
				continue
			}
			m := &machine{namespace: g.namespace, providerID: id, group: g, noMachine: true}
			g.poolOnly = append(g.poolOnly, m)
			if s.byProviderID[id] == nil {
				s.byProviderID[id] = m
			}
		}
	}
}

// NotDeletableError is returned, changing nothing, when Spotter is asked to
// delete a node that it could only delete by guessing: an instance of a
// MachinePool without a Machine. Lowering such a pool's replicas removes an
// instance of the infrastructure's choosing, perhaps another one, so Spotter
// refuses, as the cluster autoscaler's clusterapi provider does.
type NotDeletableError struct {
	// Node is the node's name, NodeGroup its group's ID.
	Node, NodeGroup string
	// Reason says why the instance has no Machine and what to do.
	Reason string
}

// Error implements error.
func (e *NotDeletableError) Error() string {
	return fmt.Sprintf("refusing to delete node %s of node group %s: %s", e.Node, e.NodeGroup, e.Reason)
}

// IsNotDeletable reports whether err is or wraps a *NotDeletableError.
func IsNotDeletable(err error) bool {
	var e *NotDeletableError
	return errors.As(err, &e)
}

// notDeletable is the refusal to delete node, an instance of pool g without a
// Machine.
func (g *NodeGroup) notDeletable(node string) *NotDeletableError {
	ref := g.templateRef
	reason := fmt.Sprintf("its infrastructure machine pool %s %s/%s makes no Machine per instance (no status.infrastructureMachineKind), "+
		"so nothing can tell it which instance to remove and lowering the replicas would remove one of its choosing; "+
		"Spotter does not guess. Use an infrastructure that supports Cluster API's MachinePool Machines, or a MachineDeployment",
		ref.kind, ref.namespace, ref.name)
	if g.template.machineKind != "" {
		reason = fmt.Sprintf("Cluster API has made no Machine for its instance yet (%s %s/%s makes a %s per instance); try again once it has",
			ref.kind, ref.namespace, ref.name, g.template.machineKind)
	}
	return &NotDeletableError{Node: node, NodeGroup: g.id, Reason: reason}
}

// nodeIDCache remembers the providerID of the Nodes of MachinePool instances
// without Machines, by Node UID: a MachinePool lists the providerIDs of its
// instances and the names of their Nodes, but not which is which. A Node's
// providerID never changes, so each Node is read at most once in its life.
type nodeIDCache struct {
	mu  sync.Mutex
	ids map[types.UID]string
}

func (c *nodeIDCache) get(uid types.UID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[uid]
	return id, ok
}

func (c *nodeIDCache) put(uid types.UID, providerID string) {
	if uid == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[types.UID]string{}
	}
	c.ids[uid] = providerID
}

// keep forgets the Nodes that no MachinePool of groups lists any more.
func (c *nodeIDCache) keep(groups []*NodeGroup) {
	live := map[types.UID]bool{}
	for _, g := range groups {
		for _, r := range g.nodeRefs {
			live[r.uid] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.ids {
		if !live[uid] {
			delete(c.ids, uid)
		}
	}
}

// poolNodeNames maps the providerIDs of the group's instances without
// Machines to the names of their Nodes, from status.nodeRefs: a Node not seen
// before is read once.
func (g *NodeGroup) poolNodeNames(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if len(g.poolOnly) == 0 {
		return out, nil
	}
	for _, r := range g.nodeRefs {
		id, ok := g.p.nodeIDs.get(r.uid)
		if !ok {
			node, err := g.p.kube.CoreV1().Nodes().Get(ctx, r.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading Node %s of node group %s: %w", r.name, g.id, cloud.FromAPIError(err))
			}
			if r.uid != "" && node.UID != r.uid {
				continue // another Node of the same name since
			}
			id = node.Spec.ProviderID
			g.p.nodeIDs.put(node.UID, id)
		}
		if id != "" {
			out[id] = r.name
		}
	}
	return out, nil
}
