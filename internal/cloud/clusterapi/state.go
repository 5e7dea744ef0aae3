package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
)

// stateCache holds the last read of the Cluster API objects.
type stateCache struct {
	// mu is held across a read, so that concurrent callers share it.
	mu sync.Mutex
	s  *state
	at time.Time
	// reported holds the problems already logged, so that each is logged
	// once, not at every read.
	reported map[string]bool
}

// state is one read of the Cluster API objects, indexed.
type state struct {
	groups       []*NodeGroup // by ID
	byID         map[string]*NodeGroup
	byKey        map[string]*machine   // namespace/name
	byName       map[string][]*machine // name, in any namespace
	byProviderID map[string]*machine
	// controlPlanes are the KubeadmControlPlanes in scope;
	// controlPlanesUnchecked says why they could not be read, when so.
	controlPlanes          []*controlPlane
	controlPlanesUnchecked error
}

// machine is what the provider needs of a Machine, or of an instance of a
// MachinePool that has no Machine (noMachine: only its providerID and group
// are known).
type machine struct {
	namespace, name string
	providerID      string
	nodeName        string // status.nodeRef.name
	created         time.Time
	deleting        bool
	controlPlane    bool
	markedForDelete bool
	failureDomain   string
	failure         error
	group           *NodeGroup
	noMachine       bool
}

// read returns the Cluster API objects as last read, or reads them again when
// that read is older than the TTL.
func (p *Provider) read(ctx context.Context) (*state, error) {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	if p.state.s != nil && p.clock.Since(p.state.at) < p.opts.TTL {
		return p.state.s, nil
	}
	s, err := p.load(ctx)
	if err != nil {
		return nil, err
	}
	p.state.s, p.state.at = s, p.clock.Now()
	return s, nil
}

// invalidate drops the last read: the next call reads again.
func (p *Provider) invalidate() {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	p.state.s = nil
}

// list lists a resource in the provider's namespace (all when unset), page by
// page. A resource of Cluster API's own groups is listed at the newest of
// APIVersions the management cluster serves (p.gvr), learned here: the
// version that answered last is asked first, and the next one when the
// management cluster does not serve it (NotFound).
func (p *Provider) list(ctx context.Context, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	versions := []string{gvr.Version}
	if capiGroup(gvr.Group) {
		learned := p.gvr(gvr).Version
		versions = append([]string{learned}, slices.DeleteFunc(slices.Clone(APIVersions), func(v string) bool { return v == learned })...)
	}
	var err error
	for _, v := range versions {
		gvr.Version = v
		var out []unstructured.Unstructured
		if out, err = p.listAt(ctx, gvr); !cloud.IsNotFound(err) {
			if err == nil && capiGroup(gvr.Group) {
				p.versions.Store(gvr.Group, v)
			}
			return out, err
		}
	}
	return nil, err
}

// listAt lists gvr, at its version, page by page.
func (p *Provider) listAt(ctx context.Context, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := p.dyn.Resource(gvr).Namespace(p.opts.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.GroupVersion().WithResource(gvr.Resource).String(), cloud.FromAPIError(err))
		}
		out = append(out, l.Items...)
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// APIVersions are the versions of Cluster API's groups (cluster.x-k8s.io,
// controlplane.cluster.x-k8s.io) the provider speaks, newest first:
// v1beta2, which Cluster API v1.11 and later store, and v1beta1, which the
// versions before serve alone. It uses the newest one the management
// cluster serves, learning it from the first List.
var APIVersions = []string{"v1beta2", "v1beta1"}

// capiGroup reports whether group is one of Cluster API's own.
func capiGroup(group string) bool {
	return group == GroupVersion.Group || group == ControlPlaneGroupVersion.Group
}

// gvr is r at the version of its group the management cluster served at
// the last List (r's own until then).
func (p *Provider) gvr(r schema.GroupVersionResource) schema.GroupVersionResource {
	if v, ok := p.versions.Load(r.Group); ok {
		r.Version = v.(string)
	}
	return r
}

// load reads MachineDeployments, MachineSets, MachinePools, Machines,
// KubeadmControlPlanes and the infrastructure machine templates and machine
// pools they use: one List each (and one per infrastructure kind).
func (p *Provider) load(ctx context.Context) (*state, error) {
	logger := klog.FromContext(ctx).WithName(ProviderName)
	mds, err := p.list(ctx, MachineDeploymentsGVR)
	if err != nil {
		return nil, err
	}
	sets, err := p.list(ctx, MachineSetsGVR)
	if err != nil {
		return nil, err
	}
	pools, err := p.listMachinePools(ctx)
	if err != nil {
		return nil, err
	}
	machines, err := p.list(ctx, MachinesGVR)
	if err != nil {
		return nil, err
	}

	s := &state{byID: map[string]*NodeGroup{}, byKey: map[string]*machine{}, byName: map[string][]*machine{}, byProviderID: map[string]*machine{}}
	byKind := map[string]*NodeGroup{} // kind/namespace/name
	add := func(kind string, obj *unstructured.Unstructured) {
		g, err := p.nodeGroup(kind, obj)
		if err != nil {
			if key := kind + "/" + obj.GetNamespace() + "/" + obj.GetName() + ": " + err.Error(); !p.state.reported[key] {
				if p.state.reported == nil {
					p.state.reported = map[string]bool{}
				}
				p.state.reported[key] = true
				logger.Error(err, "Not a node group", "kind", kind, "object", klog.KObj(obj))
			}
			return
		}
		if g != nil {
			s.groups = append(s.groups, g)
			s.byID[g.id] = g
			byKind[g.id] = g
		}
	}
	for i := range mds {
		add(KindMachineDeployment, &mds[i])
	}
	setOwner := map[string]string{} // namespace/MachineSet -> its MachineDeployment
	for i := range sets {
		ms := &sets[i]
		if ref := ownerOf(ms, KindMachineDeployment); ref != "" {
			setOwner[ms.GetNamespace()+"/"+ms.GetName()] = ref
			continue
		}
		add(KindMachineSet, ms)
	}
	for i := range pools {
		add(KindMachinePool, &pools[i])
	}
	slices.SortFunc(s.groups, func(a, b *NodeGroup) int { return strings.Compare(a.id, b.id) })
	if s.controlPlanes, s.controlPlanesUnchecked, err = p.listControlPlanes(ctx); err != nil {
		return nil, err
	}
	var refs []templateRef
	for _, g := range s.groups {
		refs = append(refs, g.templateRef)
	}
	for _, cp := range s.controlPlanes {
		refs = append(refs, cp.templateRef)
	}
	facts, err := p.readTemplates(ctx, refs)
	if err != nil {
		return nil, err
	}
	for _, g := range s.groups {
		g.template = facts[g.templateRef]
		g.spot = g.template.spot
	}
	for _, cp := range s.controlPlanes {
		cp.template = facts[cp.templateRef]
	}

	for i := range machines {
		obj := &machines[i]
		if p.opts.ClusterName != "" && clusterNameOf(obj) != p.opts.ClusterName {
			continue
		}
		m := machineOf(obj)
		if set := ownerOf(obj, KindMachineSet); set != "" {
			if md, ok := setOwner[m.namespace+"/"+set]; ok {
				m.group = byKind[groupID(KindMachineDeployment, m.namespace, md)]
			} else {
				m.group = byKind[groupID(KindMachineSet, m.namespace, set)]
			}
		} else if pool := ownerOf(obj, KindMachinePool); pool != "" {
			m.group = byKind[groupID(KindMachinePool, m.namespace, pool)]
		}
		if m.controlPlane {
			m.group = nil // whatever owns it, never a node group
		}
		if m.group != nil {
			m.group.machines = append(m.group.machines, m)
		}
		s.byKey[m.namespace+"/"+m.name] = m
		s.byName[m.name] = append(s.byName[m.name], m)
		if m.providerID != "" {
			s.byProviderID[m.providerID] = m
		}
	}
	s.indexPoolInstances()
	p.nodeIDs.keep(s.groups)
	return s, nil
}

// machineOf reads a Machine.
func machineOf(obj *unstructured.Unstructured) *machine {
	m := &machine{namespace: obj.GetNamespace(), name: obj.GetName(), created: obj.GetCreationTimestamp().Time,
		deleting: obj.GetDeletionTimestamp() != nil}
	m.providerID, _, _ = unstructured.NestedString(obj.Object, "spec", "providerID")
	m.nodeName, _, _ = unstructured.NestedString(obj.Object, "status", "nodeRef", "name")
	m.failureDomain, _, _ = unstructured.NestedString(obj.Object, "spec", "failureDomain")
	_, m.controlPlane = obj.GetLabels()[ControlPlaneLabel]
	_, m.markedForDelete = obj.GetAnnotations()[DeleteMachineAnnotation]
	// v1beta2 keeps the terminal failure of v1beta1 under status.deprecated;
	// v1beta1 has it in status.
	reason, _, _ := unstructured.NestedString(obj.Object, "status", "deprecated", "v1beta1", "failureReason")
	msg, _, _ := unstructured.NestedString(obj.Object, "status", "deprecated", "v1beta1", "failureMessage")
	if reason == "" && msg == "" {
		reason, _, _ = unstructured.NestedString(obj.Object, "status", "failureReason")
		msg, _, _ = unstructured.NestedString(obj.Object, "status", "failureMessage")
	}
	if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); reason != "" || msg != "" || phase == "Failed" {
		m.failure = fmt.Errorf("machine %s/%s failed: %s", m.namespace, m.name, strings.Trim(reason+": "+msg, ": "))
	}
	return m
}

// machineOf finds the Machine of a node: by Cluster API's annotations, else by
// providerID.
func (s *state) machineOf(node *corev1.Node) *machine {
	if name := node.Annotations[MachineAnnotation]; name != "" {
		if ns := node.Annotations[ClusterNamespaceAnnotation]; ns != "" {
			if m := s.byKey[ns+"/"+name]; m != nil {
				return m
			}
		} else if ms := s.byName[name]; len(ms) == 1 {
			return ms[0]
		}
	}
	if key, ok := strings.CutPrefix(node.Spec.ProviderID, PendingIDPrefix); ok {
		// A stand-in for a Machine whose Node never registered
		// (cloud.NodeGroup.DeleteNodes), named by its Instance.ID.
		return s.byKey[key]
	}
	if node.Spec.ProviderID != "" {
		return s.byProviderID[node.Spec.ProviderID]
	}
	return nil
}

// instance is the Machine as a cloud.Instance, without what its Node adds.
func (m *machine) instance(p *Provider) cloud.Instance {
	inst := cloud.Instance{ID: m.providerID, NodeName: m.nodeName, State: cloud.InstanceRunning, Zone: m.failureDomain}
	if inst.ID == "" {
		inst.ID = PendingIDPrefix + m.namespace + "/" + m.name
	}
	if m.group != nil {
		inst.NodeGroup, inst.Spot, inst.InstanceType = m.group.id, m.group.spot, m.group.template.instanceType
		inst.PricePerHour, inst.PriceKnown = p.price(inst.InstanceType, inst.Spot)
	}
	switch {
	case m.noMachine:
		// Listed by the infrastructure: the instance exists.
	case m.deleting:
		inst.State = cloud.InstanceDeleting
	case m.nodeName == "":
		inst.State, inst.Err = cloud.InstanceCreating, m.failure
	}
	return inst
}

// ownerOf returns the name of obj's owner of kind in Cluster API's group, or "".
func ownerOf(obj *unstructured.Unstructured, kind string) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && strings.HasPrefix(ref.APIVersion, GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// clusterNameOf is the Cluster of a Cluster API object: spec.clusterName, else
// the cluster-name label, else its owner Cluster (a control plane has no
// spec.clusterName; Cluster API labels and owns it).
func clusterNameOf(obj *unstructured.Unstructured) string {
	if name, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterName"); name != "" {
		return name
	}
	if name := obj.GetLabels()[ClusterNameLabel]; name != "" {
		return name
	}
	return ownerOf(obj, "Cluster")
}

func groupID(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// nodeGroup reads a MachineDeployment, MachineSet or MachinePool as a node
// group (the three share spec.replicas and spec.template). It returns
// nil, nil for one that is out of scope or not annotated, and an error for one
// whose annotations are wrong.
func (p *Provider) nodeGroup(kind string, obj *unstructured.Unstructured) (*NodeGroup, error) {
	if p.opts.ClusterName != "" && clusterNameOf(obj) != p.opts.ClusterName {
		return nil, nil
	}
	if !p.opts.Selector.Matches(labels.Set(obj.GetLabels())) {
		return nil, nil
	}
	min, max, ok, err := sizes(obj.GetAnnotations())
	if !ok || err != nil {
		return nil, err
	}
	tmplLabels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
	if _, cp := tmplLabels[ControlPlaneLabel]; cp {
		return nil, &cloud.ControlPlaneError{Kind: "node group", Name: groupID(kind, obj.GetNamespace(), obj.GetName()),
			Reason: fmt.Sprintf("its Machines have label %s; Spotter never scales the control plane", ControlPlaneLabel)}
	}
	g := &NodeGroup{p: p, kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(), id: groupID(kind, obj.GetNamespace(), obj.GetName()),
		min: min, max: max, annotations: obj.GetAnnotations(), templateLabels: tmplLabels}
	if r, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		g.replicas = int(r)
	}
	g.failureDomain, _, _ = unstructured.NestedString(obj.Object, "spec", "template", "spec", "failureDomain")
	if kind == KindMachinePool {
		g.readPool(obj)
	}
	ref, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "spec", "infrastructureRef")
	g.templateRef = templateRef{group: ref["apiGroup"], kind: ref["kind"], namespace: obj.GetNamespace(), name: ref["name"]}
	if g.templateRef.group == "" && ref["apiVersion"] != "" { // v1beta1's shape
		g.templateRef.group = schema.FromAPIVersionAndKind(ref["apiVersion"], ref["kind"]).Group
	}
	return g, nil
}

// errSizes is wrapped by the errors of bad size annotations.
var errSizes = errors.New("bad node group size annotations")

// sizes reads the min and max size annotations. ok is false when neither is
// there; both are needed, as the cluster autoscaler needs them.
func sizes(annotations map[string]string) (min, max int, ok bool, err error) {
	minS, hasMin := annotations[MinSizeAnnotation]
	maxS, hasMax := annotations[MaxSizeAnnotation]
	switch {
	case !hasMin && !hasMax:
		return 0, 0, false, nil
	case !hasMin || !hasMax:
		return 0, 0, false, fmt.Errorf("%w: a node group needs both %s and %s", errSizes, MinSizeAnnotation, MaxSizeAnnotation)
	}
	if min, err = strconv.Atoi(strings.TrimSpace(minS)); err != nil || min < 0 {
		return 0, 0, false, fmt.Errorf("%w: %s=%q is not a whole number >= 0", errSizes, MinSizeAnnotation, minS)
	}
	if max, err = strconv.Atoi(strings.TrimSpace(maxS)); err != nil || max < min {
		return 0, 0, false, fmt.Errorf("%w: %s=%q is not a whole number >= the minimum %d", errSizes, MaxSizeAnnotation, maxS, min)
	}
	return min, max, true, nil
}
