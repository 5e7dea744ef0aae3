package world

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/snapshot"
)

// Movable are a node's pods that an eviction can still move.
func Movable(n *Node) []*Pod {
	var out []*Pod
	for _, p := range n.pods {
		if !p.Terminating && !p.lost {
			out = append(out, p)
		}
	}
	return out
}

// Alive reports whether a node is still in the world (not terminated).
func Alive(w *World, n *Node) bool { return n.state != terminated && w.NodeByName(n.Name) == n }

// SpreadOf reads a pod template's hard constraints: whether it spreads over
// zones, and whether it has inter-pod constraints the oracle does not honour.
func SpreadOf(p *corev1.Pod) (zoneSpread, other bool) {
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue // a preference: the oracle may ignore it
		}
		if c.TopologyKey == ZoneLabel {
			zoneSpread = true
		} else {
			other = true
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			other = true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			other = true
		}
	}
	return zoneSpread, other
}

// AppsFromPods groups the pods by controller into apps.
func AppsFromPods(s *snapshot.Snapshot) []*App {
	type owner struct{ ns, kind, name string }
	byOwner := map[owner][]*corev1.Pod{}
	var order []owner
	for _, p := range s.Pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind == "DaemonSet" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		name, kind := ref.Name, scenario.Deployment
		switch ref.Kind {
		case "StatefulSet":
			kind = scenario.StatefulSet
		case "ReplicaSet":
			// A Deployment's ReplicaSet is <deployment>-<hash>.
			if i := strings.LastIndex(name, "-"); i > 0 {
				name = name[:i]
			}
		}
		o := owner{p.Namespace, kind, name}
		if _, ok := byOwner[o]; !ok {
			order = append(order, o)
		}
		byOwner[o] = append(byOwner[o], p)
	}
	var apps []*App
	for _, o := range order {
		pods := byOwner[o]
		tmpl := pods[0].DeepCopy()
		tmpl.Name, tmpl.Spec.NodeName, tmpl.Status = "", "", corev1.PodStatus{}
		tmpl.OwnerReferences, tmpl.UID, tmpl.ResourceVersion = nil, "", ""
		req := resourcehelper.PodRequests(tmpl, resourcehelper.PodResourcesOptions{})
		onDemandOnly := tmpl.Spec.NodeSelector[classify.KarpenterCapacityLabel] == scenario.OnDemand
		a := &App{Name: o.name, Namespace: o.ns, Kind: o.kind, Template: tmpl, Low: int32(len(pods)), Peak: int32(len(pods)),
			SpotEligible: !onDemandOnly, uid: types.UID(o.ns + "/" + o.kind + "/" + o.name),
			cpu: req.Cpu().MilliValue(), mem: req.Memory().Value()}
		for _, pdb := range s.PDBs {
			if pdb.Namespace != o.ns {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(tmpl.Labels)) {
				c := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: pdb.Name, Namespace: pdb.Namespace, Generation: 1}, Spec: *pdb.Spec.DeepCopy()}
				a.PDB = c
				break
			}
		}
		apps = append(apps, a)
	}
	return apps
}

// copy returns a fresh app with the same definition (each run has its own).
func (a *App) copy() *App {
	c := *a
	c.pods, c.desired, c.seq = nil, 0, 0
	return &c
}

// StartFrom replaces the scenario's workloads by apps (AppsFromPods, each
// run gets its own copies) in namespaces, before the world's first step.
func (w *World) StartFrom(apps []*App, namespaces []*corev1.Namespace) {
	w.Apps = nil
	for _, a := range apps {
		w.Apps = append(w.Apps, a.copy())
	}
	w.nsObjs = namespaces
}
