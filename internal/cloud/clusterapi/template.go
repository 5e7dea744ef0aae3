package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
)

// Capacity annotations of the cluster autoscaler's clusterapi provider, for
// scale from zero, on a MachineDeployment, MachineSet or MachinePool.
const (
	CapacityCPUAnnotation           = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	CapacityMemoryAnnotation        = "capacity.cluster-autoscaler.kubernetes.io/memory"
	CapacityEphemeralDiskAnnotation = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"
	CapacityMaxPodsAnnotation       = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	CapacityGPUTypeAnnotation       = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	CapacityGPUCountAnnotation      = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	// CapacityLabelsAnnotation is "key=value,key=value".
	CapacityLabelsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/labels"
	// CapacityTaintsAnnotation is "key=value:Effect,key:Effect".
	CapacityTaintsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// Defaults of a template node where nothing says otherwise, as the cluster
// autoscaler's.
const (
	defaultMaxPods = 110
	defaultGPUType = "nvidia.com/gpu"
	defaultArch    = "amd64"
	defaultOS      = "linux"
)

// syncedLabelPrefixes are the prefixes of the Machine labels Cluster API copies
// onto the Node (besides those of its --additional-sync-machine-labels).
var syncedLabelPrefixes = []string{"node-role.kubernetes.io/", "node-restriction.kubernetes.io/", "node.cluster.x-k8s.io/"}

// templateRef names a group's infrastructure machine template (or, for a
// MachinePool, its infrastructure machine pool).
type templateRef struct{ group, kind, namespace, name string }

// templateFacts is what the provider reads of an infrastructure machine
// template or machine pool.
type templateFacts struct {
	found bool
	spot  bool
	// spotField is the field that asks for spot capacity, when spot.
	spotField    string
	instanceType string
	// capacity and nodeInfo are status.capacity and status.nodeInfo of
	// Cluster API's opt-in autoscaling from zero contract.
	capacity       corev1.ResourceList
	arch, os       string
	capacityReason string // why capacity is unusable, when it is
	// machineKind is an infrastructure machine pool's
	// status.infrastructureMachineKind: set when the pool makes a Machine per
	// instance (Cluster API's MachinePool Machines).
	machineKind string
}

// readTemplates lists the infrastructure machine templates that refs name,
// one List per kind, and returns the facts of each.
func (p *Provider) readTemplates(ctx context.Context, refs []templateRef) (map[templateRef]templateFacts, error) {
	kinds := map[schema.GroupKind]bool{}
	for _, r := range refs {
		if r.kind != "" {
			kinds[schema.GroupKind{Group: r.group, Kind: r.kind}] = true
		}
	}
	facts := map[templateRef]templateFacts{}
	for gk := range kinds {
		mapping, err := p.mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			// A kind installed since discovery was cached.
			p.mapper.Reset()
			mapping, err = p.mapper.RESTMapping(gk)
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Infrastructure machine templates of this kind cannot be read: what uses them counts as on-demand", "kind", gk.String())
			continue
		}
		items, err := p.list(ctx, mapping.Resource)
		if err != nil {
			return nil, err
		}
		for i := range items {
			t := &items[i]
			facts[templateRef{group: gk.Group, kind: gk.Kind, namespace: t.GetNamespace(), name: t.GetName()}] = readTemplate(t)
		}
	}
	return facts, nil
}

// instanceSpecPaths are where the known infrastructure providers keep the
// fields of one instance (spot options, machine type): in an infrastructure
// machine template, or in an infrastructure machine pool (the
// infrastructureRef of a MachinePool).
var instanceSpecPaths = [][]string{
	{"spec", "template", "spec"},  // AWSMachineTemplate, AzureMachineTemplate, GCPMachineTemplate, LabMachineTemplate
	{"spec", "awsLaunchTemplate"}, // AWSMachinePool
	{"spec", "template"},          // AzureMachinePool, LabMachinePool
	{"spec"},                      // GCPMachinePool, AWSManagedMachinePool
}

// readTemplate reads the facts of an infrastructure machine template or
// machine pool, whatever its provider: the fields of the known providers that
// ask for spot capacity and name the machine type. It is the one reader of
// spot fields, for node groups and control planes alike.
func readTemplate(t *unstructured.Unstructured) templateFacts {
	f := templateFacts{found: true}
	for _, path := range instanceSpecPaths {
		spec, ok, _ := unstructured.NestedMap(t.Object, path...)
		if !ok {
			continue
		}
		if field := spotFieldOf(spec); field != "" && f.spotField == "" {
			f.spotField = strings.Join(path, ".") + "." + field
		}
		for _, k := range []string{"instanceType", "vmSize", "machineType"} {
			if s, ok := spec[k].(string); ok && s != "" && f.instanceType == "" {
				f.instanceType = s
			}
		}
	}
	if f.spotField == "" {
		f.spotField = poolSpotFieldOf(t)
	}
	f.spot = f.spotField != ""
	f.machineKind, _, _ = unstructured.NestedString(t.Object, "status", "infrastructureMachineKind")
	if c, ok, _ := unstructured.NestedMap(t.Object, "status", "capacity"); ok {
		f.capacity = corev1.ResourceList{}
		for k, v := range c {
			q, err := resource.ParseQuantity(fmt.Sprint(v))
			if err != nil {
				f.capacityReason = fmt.Sprintf("status.capacity.%s=%v: %v", k, v, err)
				f.capacity = nil
				break
			}
			f.capacity[corev1.ResourceName(k)] = q
		}
	}
	f.arch, _, _ = unstructured.NestedString(t.Object, "status", "nodeInfo", "architecture")
	f.os, _, _ = unstructured.NestedString(t.Object, "status", "nodeInfo", "operatingSystem")
	return f
}

// spotFieldOf names the field of one instance's spec that asks for spot
// capacity, or "".
func spotFieldOf(spec map[string]any) string {
	has := func(k string) bool { v, ok := spec[k]; return ok && v != nil }
	preemptible, _ := spec["preemptible"].(bool)
	model, _ := spec["provisioningModel"].(string)
	switch {
	case has("spotMarketOptions"): // AWS (and the lab's)
		return "spotMarketOptions"
	case has("spotVMOptions"): // Azure
		return "spotVMOptions"
	case preemptible: // GCP
		return "preemptible"
	case strings.EqualFold(model, "Spot"): // GCP
		return "provisioningModel"
	}
	return ""
}

// poolSpotFieldOf names the field of an infrastructure machine pool that makes
// all its instances spot without a per-instance spot option, or "": an
// AWSMachinePool whose mixed instances policy has no on-demand base capacity
// and 0% on-demand above it (the Auto Scaling group's rule, as the aws
// provider reads it), an AWSManagedMachinePool (EKS managed node group) of
// capacityType spot.
func poolSpotFieldOf(t *unstructured.Unstructured) string {
	const dist = "spec.mixedInstancesPolicy.instancesDistribution"
	if d, ok, _ := unstructured.NestedMap(t.Object, "spec", "mixedInstancesPolicy", "instancesDistribution"); ok {
		base, hasBase := asInt(d["onDemandBaseCapacity"])
		pct, hasPct := asInt(d["onDemandPercentageAboveBaseCapacity"])
		// Absent, the base is 0 and the percentage 100 (CAPA's defaults, the
		// Auto Scaling API's too).
		if (!hasBase || base == 0) && hasPct && pct == 0 {
			return dist + ".onDemandPercentageAboveBaseCapacity"
		}
	}
	if c, _, _ := unstructured.NestedString(t.Object, "spec", "capacityType"); strings.EqualFold(c, "spot") {
		return "spec.capacityType"
	}
	return ""
}

// asInt reads a whole number of unstructured content (int64 from the
// apiserver's JSON, float64 from other decoders).
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// TemplateNode implements cloud.NodeGroup. A group with a Ready,
// schedulable Node copies it (cloud.TemplateFromNode), as the cluster
// autoscaler does; a group
// without one builds it from the capacity annotations, else from the
// infrastructure machine template's status.capacity. Without either, it
// returns an error that says which annotations to add.
func (g *NodeGroup) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	cur, err := g.fresh(ctx)
	if err != nil {
		return nil, err
	}
	// One Get per group per read of the Cluster API objects (TTL), not one
	// per call.
	cur.liveMu.Lock()
	defer cur.liveMu.Unlock()
	if cur.live != nil {
		return cur.live.DeepCopy(), nil
	}
	var names []string
	for _, m := range cur.machines {
		if m.nodeName != "" && !m.deleting {
			names = append(names, m.nodeName)
		}
	}
	for _, r := range cur.nodeRefs { // a MachinePool's
		names = append(names, r.name)
	}
	for _, name := range names {
		node, err := g.p.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if cloud.IsNotFound(cloud.FromAPIError(err)) {
				continue
			}
			return nil, fmt.Errorf("reading Node %s of node group %s: %w", name, g.id, cloud.FromAPIError(err))
		}
		if !cloud.LiveCandidate(node) {
			continue
		}
		cur.live = cur.fromNode(node)
		return cur.live.DeepCopy(), nil
	}
	return cur.fromAnnotations()
}

// templateName is the name of the group's template node.
func (g *NodeGroup) templateName() string {
	return "template-" + strings.ToLower(g.kind) + "-" + g.namespace + "-" + g.name
}

// fromNode is a template of the group copied from one of its Nodes
// (cloud.TemplateFromNode), marked spot or on-demand as the group is.
func (g *NodeGroup) fromNode(node *corev1.Node) *corev1.Node {
	out := cloud.TemplateFromNode(node, g.templateName())
	g.markCapacityType(out.Labels)
	return out
}

// markCapacityType labels a template node spot or on-demand, as the group is.
func (g *NodeGroup) markCapacityType(labels map[string]string) {
	if g.spot {
		labels[CapacityTypeLabel] = "spot"
		if _, ok := labels[InterruptibleLabel]; !ok {
			labels[InterruptibleLabel] = ""
		}
		return
	}
	labels[CapacityTypeLabel] = "on-demand"
	delete(labels, InterruptibleLabel)
}

// fromAnnotations builds the template of a group without Nodes.
func (g *NodeGroup) fromAnnotations() (*corev1.Node, error) {
	capacity, err := capacityFromAnnotations(g.annotations)
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.id, err)
	}
	if capacity == nil && g.template.capacity != nil {
		capacity = g.template.capacity.DeepCopy()
		if _, ok := capacity[corev1.ResourcePods]; !ok {
			capacity[corev1.ResourcePods] = *resource.NewQuantity(defaultMaxPods, resource.DecimalSI)
		}
	}
	if capacity.Cpu().IsZero() || capacity.Memory().IsZero() {
		why := ""
		if g.template.capacityReason != "" {
			why = " (its template's " + g.template.capacityReason + ")"
		}
		return nil, fmt.Errorf("node group %s has no nodes and no capacity to plan a new one with%s: annotate the %s with %s and %s "+
			"(and, as needed, %s, %s, %s, %s, %s, %s), or have its infrastructure machine template report status.capacity",
			g.id, why, g.kind, CapacityCPUAnnotation, CapacityMemoryAnnotation, CapacityEphemeralDiskAnnotation, CapacityMaxPodsAnnotation,
			CapacityGPUTypeAnnotation, CapacityGPUCountAnnotation, CapacityLabelsAnnotation, CapacityTaintsAnnotation)
	}
	name := g.templateName()
	lbls := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelArchStable: or(g.template.arch, defaultArch),
		corev1.LabelOSStable:   or(g.template.os, defaultOS),
	}
	if g.template.instanceType != "" {
		lbls[corev1.LabelInstanceTypeStable] = g.template.instanceType
	}
	if g.failureDomain != "" {
		lbls[corev1.LabelTopologyZone] = g.failureDomain
	}
	for k, v := range g.templateLabels {
		for _, prefix := range syncedLabelPrefixes {
			if strings.HasPrefix(k, prefix) {
				lbls[k] = v
			}
		}
	}
	extra, err := parseLabels(g.annotations[CapacityLabelsAnnotation])
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.id, err)
	}
	for k, v := range extra {
		lbls[k] = v
	}
	g.markCapacityType(lbls)
	taints, err := parseTaints(g.annotations[CapacityTaintsAnnotation])
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.id, err)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, nil
}

func or(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// capacityFromAnnotations reads the capacity annotations; nil when there are
// none.
func capacityFromAnnotations(a map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for key, name := range map[string]corev1.ResourceName{
		CapacityCPUAnnotation:           corev1.ResourceCPU,
		CapacityMemoryAnnotation:        corev1.ResourceMemory,
		CapacityEphemeralDiskAnnotation: corev1.ResourceEphemeralStorage,
		CapacityMaxPodsAnnotation:       corev1.ResourcePods,
	} {
		v, ok := a[key]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("annotation %s=%q is not a quantity >= 0", key, v)
		}
		out[name] = q
	}
	if v, ok := a[CapacityGPUCountAnnotation]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("annotation %s=%q is not a count >= 0", CapacityGPUCountAnnotation, v)
		}
		out[corev1.ResourceName(or(strings.TrimSpace(a[CapacityGPUTypeAnnotation]), defaultGPUType))] = q
	}
	if len(out) == 0 {
		return nil, nil
	}
	if _, ok := out[corev1.ResourcePods]; !ok {
		out[corev1.ResourcePods] = *resource.NewQuantity(defaultMaxPods, resource.DecimalSI)
	}
	return out, nil
}

// parseLabels reads "key=value,key=value".
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("annotation %s: %q is not key=value", CapacityLabelsAnnotation, item)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// parseTaints reads "key=value:Effect,key:Effect".
func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kv, effect, ok := strings.Cut(item, ":")
		e := corev1.TaintEffect(strings.TrimSpace(effect))
		if !ok || !slices.Contains([]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}, e) {
			return nil, fmt.Errorf("annotation %s: %q is not key=value:Effect or key:Effect (Effect NoSchedule, PreferNoSchedule or NoExecute)", CapacityTaintsAnnotation, item)
		}
		k, v, _ := strings.Cut(kv, "=")
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("annotation %s: %q has no key", CapacityTaintsAnnotation, item)
		}
		out = append(out, corev1.Taint{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), Effect: e})
	}
	return out, nil
}
