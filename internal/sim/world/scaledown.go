package world

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/sim/report"
)

// The cluster autoscaler's scale-down of nodes that still hold pods, with its
// defaults (cluster-autoscaler FAQ, "How does scale-down work?", and its
// flags):
const (
	// scaleDownUtilization: a node whose pods request less than this share
	// of its allocatable CPU and of its memory is a candidate
	// (--scale-down-utilization-threshold).
	scaleDownUtilization = 0.5
	// scaleDownDelayAfterAdd: no scale-down this long after a scale-up
	// (--scale-down-delay-after-add).
	scaleDownDelayAfterAdd = 10 * time.Minute
	// maxGracefulTermination: how long the autoscaler waits for a drained
	// node's pods before it gives the node up (--max-graceful-termination-sec).
	maxGracefulTermination = 10 * time.Minute
	// toBeDeletedTaint is the taint the autoscaler puts on a node it removes.
	toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// underused reports whether a node's pods request less than
// scaleDownUtilization of its CPU and of its memory.
func underused(n *Node) bool {
	var cpu, mem int64
	for _, p := range n.pods {
		if !p.Terminating {
			cpu, mem = cpu+p.App.cpu, mem+p.App.mem
		}
	}
	return float64(cpu) < scaleDownUtilization*float64(n.Group.cpu) && float64(mem) < scaleDownUtilization*float64(n.Group.mem)
}

// scaleDownUnderused is the autoscaler's removal of a node that still holds
// pods: a Ready node, not cordoned, drained or noticed, above its group's
// minimum, under-used for ScaleDownUnneededTime, whose pods may all be
// evicted now (their PodDisruptionBudgets allow it) and all fit on the other
// nodes (the kube-scheduler's filter and score plugins place them one by one,
// as the autoscaler's simulation does), is tainted ToBeDeletedByClusterAutoscaler
// and drained through the Eviction API; once empty it is deleted. Pods still
// there after maxGracefulTermination end the attempt: the taint comes off.
// One node at a time, none within scaleDownDelayAfterAdd of a scale-up.
func (a *Autoscaler) scaleDownUnderused(ctx context.Context) error {
	w := a.w
	now := w.Now()
	if a.removing != nil {
		n := a.removing
		switch {
		case !Alive(w, n):
			a.removing = nil
		case len(n.pods) == 0:
			a.removing = nil
			w.DeleteNode(n)
		case now.Sub(n.toBeDeleted) >= maxGracefulTermination:
			a.removing = nil
			n.toBeDeleted = time.Time{}
			w.refresh(n)
		default:
			for _, p := range Movable(n) {
				_ = w.Evict(p, report.ComponentAutoscaler)
			}
		}
		return nil
	}
	unneeded := w.sc.Cluster.ScaleDownUnneededTime.Duration
	var ready []*Node
	for _, n := range w.nodes {
		candidate := n.Ready() && len(n.pods) > 0 && !n.Cordoned && n.Draining == "" && !n.Noticed() && underused(n)
		if !candidate {
			n.underusedSince = time.Time{}
			continue
		}
		if n.underusedSince.IsZero() {
			n.underusedSince = now
		}
		if now.Sub(n.underusedSince) >= unneeded && now.Sub(n.ReadyAt) >= unneeded && n.Group.count > int(n.Group.Min) {
			ready = append(ready, n)
		}
	}
	if len(ready) == 0 || now.Sub(a.lastScaleUp) < scaleDownDelayAfterAdd {
		return nil
	}
	for _, n := range ready {
		ok, err := a.podsCanMove(ctx, n)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		n.toBeDeleted = now
		w.refresh(n)
		a.removing = n
		for _, p := range Movable(n) {
			_ = w.Evict(p, report.ComponentAutoscaler)
		}
		return nil
	}
	return nil
}

// podsCanMove reports whether every pod of n may be evicted now and fits on
// the world's other Ready nodes.
func (a *Autoscaler) podsCanMove(ctx context.Context, n *Node) (bool, error) {
	w := a.w
	moving := map[*App]int{}
	for _, p := range Movable(n) {
		moving[p.App]++
	}
	for app, k := range moving {
		if app.PDB != nil && w.PDBAllows(app) < k {
			return false, nil
		}
	}
	// A necessary condition first, cheap: the other nodes' free room, all
	// of it and the largest, holds the pods.
	var cpu, mem, bigCPU, bigMem, roomCPU, roomMem, maxCPU, maxMem int64
	for _, p := range Movable(n) {
		cpu, mem = cpu+p.App.cpu, mem+p.App.mem
		bigCPU, bigMem = max(bigCPU, p.App.cpu), max(bigMem, p.App.mem)
	}
	for _, o := range w.ReadyNodes() {
		if o == n || o.Cordoned {
			continue
		}
		freeCPU, freeMem := o.Group.cpu, o.Group.mem
		for _, p := range o.pods {
			freeCPU, freeMem = freeCPU-p.App.cpu, freeMem-p.App.mem
		}
		roomCPU, roomMem = roomCPU+max(freeCPU, 0), roomMem+max(freeMem, 0)
		maxCPU, maxMem = max(maxCPU, freeCPU), max(maxMem, freeMem)
	}
	if roomCPU < cpu || roomMem < mem || maxCPU < bigCPU || maxMem < bigMem {
		return false, nil
	}
	if a.k == nil {
		k, err := newKubeScheduler(ctx, w)
		if err != nil {
			return false, err
		}
		a.k = k
	}
	var nodes []*corev1.Node
	for _, o := range w.ReadyNodes() {
		if o != n {
			nodes = append(nodes, o.Obj)
		}
	}
	var bound []*corev1.Pod
	for _, p := range w.pods {
		if p.Node != nil && p.Node != n {
			bound = append(bound, p.Obj)
		}
	}
	if err := a.k.Sync(nodes, bound); err != nil {
		return false, err
	}
	for _, p := range Movable(n) {
		name, _, err := a.k.Schedule(ctx, p.Unbound())
		if err != nil || name == "" {
			return false, err
		}
	}
	return true, nil
}
