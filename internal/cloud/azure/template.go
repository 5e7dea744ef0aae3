package azure

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// skuFacts is a VM size's vCPUs and memory, from the resource SKUs API.
type skuFacts struct {
	vcpus    int64
	memoryGB float64
}

// sku reads a VM size's capabilities: one paged list of the resource SKUs
// of location (filtered by location, as ARM allows), kept for good.
func (p *Provider) sku(ctx context.Context, location, name string) (skuFacts, error) {
	loc := strings.ToLower(location)
	p.mu.Lock()
	byName, ok := p.skus[loc]
	p.mu.Unlock()
	if !ok {
		byName = map[string]skuFacts{}
		filter := "location eq '" + loc + "'"
		for pager := p.c.SKUs.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: &filter}); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return skuFacts{}, fmt.Errorf("listing the resource SKUs of %s: %w", loc, mapError("", err))
			}
			for _, s := range page.Value {
				if str(s.ResourceType) != "virtualMachines" {
					continue
				}
				var f skuFacts
				for _, c := range s.Capabilities {
					switch str(c.Name) {
					case "vCPUs":
						f.vcpus, _ = strconv.ParseInt(str(c.Value), 10, 64)
					case "MemoryGB":
						f.memoryGB, _ = strconv.ParseFloat(str(c.Value), 64)
					}
				}
				byName[strings.ToLower(str(s.Name))] = f
			}
		}
		p.mu.Lock()
		p.skus[loc] = byName
		p.mu.Unlock()
	}
	f, ok := byName[strings.ToLower(name)]
	if !ok || f.vcpus <= 0 || f.memoryGB <= 0 {
		return skuFacts{}, fmt.Errorf("VM size %s: not among the resource SKUs of %s, or without vCPUs and MemoryGB", name, loc)
	}
	return f, nil
}

// templateTags reads the cluster autoscaler's node-template tags of a scale
// set: labels, taints (value:effect) and extra resources. A tag's key
// after the prefix reads '_' as '/' and "~2" as '_' (Azure tag names hold no
// '/').
func templateTags(tags map[string]string) (labels map[string]string, taints []corev1.Taint, resources corev1.ResourceList, err error) {
	labels, resources = map[string]string{}, corev1.ResourceList{}
	decode := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "_", "/"), "~2", "_") }
	for _, name := range slices.Sorted(maps.Keys(tags)) {
		value := tags[name]
		switch {
		case strings.HasPrefix(name, NodeTemplateLabelTag):
			if k := decode(strings.TrimPrefix(name, NodeTemplateLabelTag)); k != "" {
				labels[k] = value
			}
		case strings.HasPrefix(name, NodeTemplateTaintTag):
			k := decode(strings.TrimPrefix(name, NodeTemplateTaintTag))
			v, effect, ok := strings.Cut(value, ":")
			switch e := corev1.TaintEffect(effect); {
			case k == "" || !ok:
				return nil, nil, nil, fmt.Errorf("tag %s=%s: want value:effect", name, value)
			case e != corev1.TaintEffectNoSchedule && e != corev1.TaintEffectPreferNoSchedule && e != corev1.TaintEffectNoExecute:
				return nil, nil, nil, fmt.Errorf("tag %s=%s: unknown effect %q", name, value, effect)
			}
			taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
		case strings.HasPrefix(name, NodeTemplateResourcesTag):
			q, err := resource.ParseQuantity(value)
			if err != nil || q.Sign() < 0 {
				return nil, nil, nil, fmt.Errorf("tag %s=%s: not a quantity", name, value)
			}
			resources[corev1.ResourceName(decode(strings.TrimPrefix(name, NodeTemplateResourcesTag)))] = q
		}
	}
	return labels, taints, resources, nil
}

// TemplateNode implements cloud.NodeGroup: a node of the set's VM size
// (vCPUs and memory from the resource SKUs API), in the set's location and
// first zone, with the AKS node-pool labels (kubernetes.azure.com/agentpool
// and agentpool, from the aks-managed-poolName tag), AKS's spot label and
// taint (kubernetes.azure.com/scalesetpriority=spot:NoSchedule) for a spot
// set, and the labels, taints and resources of the cluster autoscaler's
// node-template tags, which win. Allocatable is capacity: the reservations
// AKS makes are not read.
func (g *NodeGroup) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	f := g.facts
	size, err := g.p.sku(ctx, f.location, f.sku)
	if err != nil {
		return nil, fmt.Errorf("scale set %s: %w", g.ID(), err)
	}
	tagLabels, tagTaints, extra, err := templateTags(f.tags)
	if err != nil {
		return nil, fmt.Errorf("scale set %s: %w", g.ID(), err)
	}
	name := "template-" + strings.ReplaceAll(g.ID(), "/", "-")
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(size.vcpus, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(math.Round(size.memoryGB*(1<<30))), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	maps.Copy(capacity, extra)
	location := strings.ToLower(f.location)
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelInstanceTypeStable: f.sku, corev1.LabelTopologyRegion: location,
		corev1.LabelOSStable: "linux"}
	if len(f.zones) > 0 {
		labels[corev1.LabelTopologyZone] = location + "-" + f.zones[0]
	}
	var taints []corev1.Taint
	if pool := poolOf(f.tags); pool != "" {
		labels[AgentPoolLabel], labels[LegacyAgentPoolLabel] = pool, pool
	}
	if f.spot {
		labels[ScaleSetPriorityLabel] = "spot"
		taints = append(taints, corev1.Taint{Key: ScaleSetPriorityLabel, Value: "spot", Effect: corev1.TaintEffectNoSchedule})
	}
	maps.Copy(labels, tagLabels)
	for _, t := range tagTaints {
		taints = slices.DeleteFunc(taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect })
		taints = append(taints, t)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, nil
}
