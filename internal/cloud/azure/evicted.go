package azure

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// A spot VM that Azure evicts with evictionPolicy Deallocate is not deleted:
// it stays in its scale set, deallocated (it still counts in the set's
// capacity, and its disks are billed), and its Node stays, NotReady, until
// someone deletes them. The Cluster API proposal for spot instances asks
// that such a machine be deleted; Spotter does that for the scale sets it
// manages: Start runs SweepEvicted every EvictedSweep.

// Start implements the controller-runtime manager's Runnable: it runs
// SweepEvicted every EvictedSweep (on the provider's clock) until ctx ends.
// Errors are logged: the next sweep tries again.
func (p *Provider) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("provider", ProviderName)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(p.opts.EvictedSweep):
		}
		if _, err := p.SweepEvicted(klog.NewContext(ctx, logger)); err != nil {
			logger.Error(err, "Deleting evicted spot VMs")
		}
	}
}

// NeedLeaderElection makes the sweep run on the leader only.
func (p *Provider) NeedLeaderElection() bool { return true }

// SweepEvicted deletes the evicted spot VMs of the configured spot scale
// sets whose eviction policy is Deallocate (one list of each such set's
// VMs): each VM whose power state is deallocated (or deallocating) goes with
// one delete instances per set, which lowers the capacity by as many (a set
// brought below its minSize is then raised back to it, asking Azure for a
// new VM), and its Node object after it. A VM whose Node is a control-plane
// node is left alone. It returns the provider IDs of the VMs deleted.
func (p *Provider) SweepEvicted(ctx context.Context) ([]string, error) {
	groups, err := p.readGroups(ctx)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	var deleted []string
	var errs []error
	for _, g := range groups {
		if !g.facts.spot || g.facts.evictionPolicy != "Deallocate" {
			continue
		}
		recs, err := g.listVMs(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var evicted []vmRecord
		for _, r := range recs {
			if r.live() && r.facts.deallocated && r.facts.spot {
				evicted = append(evicted, r)
			}
		}
		if len(evicted) == 0 {
			continue
		}
		n, err := g.deleteEvicted(ctx, evicted)
		deleted = append(deleted, n...)
		if err != nil {
			errs = append(errs, err)
		}
		if len(n) > 0 {
			logger.Info("Deleted evicted spot VMs and their Nodes", "group", g.ID(), "vms", n)
		}
	}
	if len(errs) > 0 {
		return deleted, fmt.Errorf("deleting evicted spot VMs: %v", errs)
	}
	return deleted, nil
}

// deleteEvicted deletes the evicted VMs of g (not those of control-plane
// nodes) and their Nodes.
func (g *NodeGroup) deleteEvicted(ctx context.Context, evicted []vmRecord) ([]string, error) {
	byID := map[string]*corev1.Node{}
	if g.p.kube != nil {
		list, err := g.p.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Nodes: %w", cloud.FromAPIError(err))
		}
		for i := range list.Items {
			if k, ok := keyOf(&list.Items[i]); ok {
				byID[k.resourceID()] = &list.Items[i]
			}
		}
	}
	var keys []vmKey
	var ids []string
	var nodes []string
	for _, r := range evicted {
		node := byID[r.facts.key.resourceID()]
		if node != nil {
			if err := cloud.CheckDeletable(node); err != nil {
				klog.FromContext(ctx).Error(err, "Leaving an evicted spot VM alone", "vm", r.armID)
				continue
			}
			nodes = append(nodes, node.Name)
		}
		keys = append(keys, r.facts.key)
		ids = append(ids, "azure://"+r.armID)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	capacity, err := g.capacity(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.deleteInstances(ctx, keys); err != nil {
		return nil, err
	}
	for _, name := range nodes {
		if err := providerkit.DeleteNode(ctx, g.p.kube, name); err != nil {
			return ids, err
		}
	}
	if left := capacity - len(keys); left < g.min {
		if _, err := g.update(ctx, g.min); err != nil {
			return ids, fmt.Errorf("scale set %s: raising the capacity back to its minimum %d: %w", g.ID(), g.min, err)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
