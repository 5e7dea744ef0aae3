package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// NodeGroup is a MachineDeployment, a MachineSet no MachineDeployment owns, or
// a MachinePool, as of one read of the Cluster API objects. Its methods read
// again (or use a read younger than the TTL) for what changes.
type NodeGroup struct {
	p                         *Provider
	kind, namespace, name, id string
	min, max, replicas        int
	spot                      bool
	failureDomain             string
	annotations               map[string]string
	templateLabels            map[string]string
	templateRef               templateRef
	template                  templateFacts
	machines                  []*machine
	// Of a MachinePool: its spec.providerIDList and status.nodeRefs, and its
	// instances that have no Machine.
	providerIDs []string
	nodeRefs    []nodeRef
	poolOnly    []*machine

	// live caches the template copied from a live Node for as long as this
	// read of the Cluster API objects serves: a migrator run asks every
	// group's template once per candidate node.
	liveMu sync.Mutex
	live   *corev1.Node
}

// ID implements cloud.NodeGroup: <kind>/<namespace>/<name>, as the cluster
// autoscaler names Cluster API node groups.
func (g *NodeGroup) ID() string { return g.id }

// Spot implements cloud.NodeGroup: its infrastructure machine template asks
// for spot capacity.
func (g *NodeGroup) Spot() bool { return g.spot }

// MinSize implements cloud.NodeGroup: the min size annotation.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloud.NodeGroup: the max size annotation.
func (g *NodeGroup) MaxSize() int { return g.max }

// PricePerHour implements cloud.NodeGroup: the configured price of its
// template's instance type.
func (g *NodeGroup) PricePerHour() (float64, bool) {
	return g.p.price(g.template.instanceType, g.spot)
}

// fresh returns the group as the provider's current read has it, or a
// *cloud.NotFoundError when it is no node group any more.
func (g *NodeGroup) fresh(ctx context.Context) (*NodeGroup, error) {
	s, err := g.p.read(ctx)
	if err != nil {
		return nil, err
	}
	cur, ok := s.byID[g.id]
	if !ok {
		return nil, cloud.NewNotFoundError(fmt.Errorf("node group %s: gone, or without its size annotations", g.id))
	}
	return cur, nil
}

// reread drops the provider's read and returns the group as it is now: writes
// decide on what is current, not on a read up to a TTL old.
func (g *NodeGroup) reread(ctx context.Context) (*NodeGroup, error) {
	g.p.invalidate()
	return g.fresh(ctx)
}

// TargetSize implements cloud.NodeGroup: spec.replicas.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) {
	cur, err := g.fresh(ctx)
	if err != nil {
		return 0, err
	}
	return cur.replicas, nil
}

func (g *NodeGroup) gvr() schema.GroupVersionResource {
	switch g.kind {
	case KindMachineSet:
		return g.p.gvr(MachineSetsGVR)
	case KindMachinePool:
		return g.p.gvr(MachinePoolsGVR)
	}
	return g.p.gvr(MachineDeploymentsGVR)
}

// scale reads the group's scale subresource: its replicas and the
// resourceVersion a write must carry.
func (g *NodeGroup) scale(ctx context.Context) (*unstructured.Unstructured, int, error) {
	s, err := g.p.dyn.Resource(g.gvr()).Namespace(g.namespace).Get(ctx, g.name, metav1.GetOptions{}, "scale")
	if err != nil {
		return nil, 0, fmt.Errorf("reading the scale of %s: %w", g.id, cloud.FromAPIError(err))
	}
	// Scale's spec.replicas is omitted when 0.
	r, _, err := unstructured.NestedInt64(s.Object, "spec", "replicas")
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: %w", g.id, errBadScale, err)
	}
	return s, int(r), nil
}

// setScale writes replicas through the scale subresource read as s. The
// resourceVersion of s goes with it: when anyone changed the group since, the
// write fails with a conflict instead of overwriting their change.
func (g *NodeGroup) setScale(ctx context.Context, s *unstructured.Unstructured, replicas int) error {
	defer g.p.invalidate()
	if err := unstructured.SetNestedField(s.Object, int64(replicas), "spec", "replicas"); err != nil {
		return err
	}
	_, err := g.p.dyn.Resource(g.gvr()).Namespace(g.namespace).Update(ctx, s, metav1.UpdateOptions{}, "scale")
	if err != nil && !apierrors.IsConflict(err) {
		err = cloud.FromAPIError(err)
	}
	if err != nil {
		return fmt.Errorf("setting the replicas of %s to %d: %w", g.id, replicas, err)
	}
	return nil
}

// IncreaseSize implements cloud.NodeGroup: spec.replicas goes up by delta
// through the scale subresource; Cluster API creates the Machines.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckIncrease(delta); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := g.reread(ctx)
		if err != nil {
			return err
		}
		s, replicas, err := g.scale(ctx)
		if err != nil {
			return err
		}
		if err := providerkit.CheckMax(g.id, delta, replicas+delta, cur.max); err != nil {
			return err
		}
		return g.setScale(ctx, s, replicas+delta)
	})
}

// DecreaseTargetSize implements cloud.NodeGroup: it cancels Machines that have
// no Node yet (still provisioning), newest first: it annotates exactly those
// for deletion and lowers spec.replicas by delta in one write. Replicas that
// Cluster API has not made Machines for yet count as unfulfilled too. Of a
// MachinePool, an instance without a Machine is never cancelled, Node or not:
// only replicas the infrastructure has listed no instance for are.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckDecrease(delta); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := g.reread(ctx)
		if err != nil {
			return err
		}
		s, replicas, err := g.scale(ctx)
		if err != nil {
			return err
		}
		registered := len(cur.poolOnly)
		var provisioning []*machine
		for _, m := range cur.machines {
			switch {
			case m.deleting:
			case m.nodeName != "":
				registered++
			default:
				provisioning = append(provisioning, m)
			}
		}
		if err := providerkit.CheckCancel(g.id, delta, max(replicas-registered, 0), "replica(s) without a Node yet", replicas, cur.min); err != nil {
			return err
		}
		slices.SortFunc(provisioning, func(a, b *machine) int { return b.created.Compare(a.created) })
		return g.deleteMachines(ctx, s, replicas-delta, provisioning[:min(delta, len(provisioning))])
	})
}

// DeleteNodes implements cloud.NodeGroup: it checks every node first (its
// Machine is in the group, not control plane, the group stays at or above its
// minimum), then annotates their Machines for deletion and lowers
// spec.replicas by as many in one write, carrying the resourceVersion read,
// so that Cluster API deletes exactly those Machines and, with them, their
// Nodes. A node whose Machine is already being deleted needs nothing more.
// Of a MachinePool it is the infrastructure machine pool that scales down and
// removes the annotated Machines first, as Cluster API's MachinePool Machines
// ask of it; a node of a MachinePool without a Machine is refused with a
// *NotDeletableError.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	for _, n := range nodes {
		if err := cloud.CheckDeletable(n); err != nil {
			return err
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := g.reread(ctx)
		if err != nil {
			return err
		}
		s, err := g.p.read(ctx)
		if err != nil {
			return err
		}
		var doomed []*machine
		for _, n := range nodes {
			m := s.machineOf(n)
			switch {
			case m != nil && m.controlPlane:
				return &cloud.ControlPlaneError{Kind: "node", Name: n.Name,
					Reason: fmt.Sprintf("its Machine %s/%s has label %s; Spotter never deletes it", m.namespace, m.name, ControlPlaneLabel)}
			case m == nil || m.group == nil || m.group.id != g.id:
				return fmt.Errorf("node %s in %s: %w", n.Name, g.id, cloud.ErrNotInNodeGroup)
			case m.noMachine:
				return m.group.notDeletable(n.Name)
			case m.deleting || slices.Contains(doomed, m):
				continue
			}
			doomed = append(doomed, m)
		}
		if len(doomed) == 0 {
			return nil
		}
		scale, replicas, err := g.scale(ctx)
		if err != nil {
			return err
		}
		if err := providerkit.CheckDelete(g.id, len(doomed), replicas, cur.min); err != nil {
			return err
		}
		return g.deleteMachines(ctx, scale, replicas-len(doomed), doomed)
	})
}

// deleteMachines annotates machines for deletion, then writes replicas with
// the resourceVersion of scale. When the write fails, the annotations it added
// are taken off again, so that no later scale-down picks those Machines.
func (g *NodeGroup) deleteMachines(ctx context.Context, scale *unstructured.Unstructured, replicas int, machines []*machine) error {
	logger := klog.FromContext(ctx)
	var added []*machine
	undo := func() {
		// A fresh context: the annotations must go even when ctx ended.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, m := range added {
			if err := g.annotate(uctx, m, nil); err != nil {
				logger.Error(err, "Removing the delete-machine annotation after a failed scale-down", "machine", klog.KRef(m.namespace, m.name))
			}
		}
	}
	at := g.p.clock.Now().UTC().Format(time.RFC3339)
	for _, m := range machines {
		if m.markedForDelete {
			continue
		}
		if err := g.annotate(ctx, m, &at); err != nil {
			undo()
			return err
		}
		added = append(added, m)
	}
	if err := g.setScale(ctx, scale, replicas); err != nil {
		undo()
		return err
	}
	names := make([]string, len(machines))
	for i, m := range machines {
		names[i] = m.name
	}
	logger.Info("Scaled a Cluster API node group down", "group", g.id, "replicas", replicas, "machines", names)
	return nil
}

// annotate sets (value non-nil) or removes the delete-machine annotation of a
// Machine.
func (g *NodeGroup) annotate(ctx context.Context, m *machine, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{DeleteMachineAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = g.p.dyn.Resource(g.p.gvr(MachinesGVR)).Namespace(m.namespace).Patch(ctx, m.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotating Machine %s/%s %s: %w", m.namespace, m.name, DeleteMachineAnnotation, cloud.FromAPIError(err))
	}
	return nil
}

// Nodes implements cloud.NodeGroup: the group's Machines (Creating until they
// have a Node, Deleting once being deleted, with the Machine's failure as Err),
// a MachinePool's instances without Machines (Running, with their Node's name
// once Cluster API lists it in status.nodeRefs), and one Creating instance
// without ID per replica that has neither a Machine nor an instance yet.
func (g *NodeGroup) Nodes(ctx context.Context) ([]cloud.Instance, error) {
	cur, err := g.fresh(ctx)
	if err != nil {
		return nil, err
	}
	names, err := cur.poolNodeNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.Instance, 0, max(cur.replicas, len(cur.machines)+len(cur.poolOnly)))
	live := 0
	for _, m := range cur.machines {
		out = append(out, m.instance(g.p))
		if !m.deleting {
			live++
		}
	}
	for _, m := range cur.poolOnly {
		inst := m.instance(g.p)
		inst.NodeName = names[m.providerID]
		out = append(out, inst)
		live++
	}
	for range cur.replicas - live {
		out = append(out, cloud.Instance{NodeGroup: g.id, Spot: cur.spot, InstanceType: cur.template.instanceType, State: cloud.InstanceCreating})
	}
	return out, nil
}
