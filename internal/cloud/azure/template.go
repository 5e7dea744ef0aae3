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

	"spotter.dev/spotter/internal/cloud"
)

// skuFacts is a VM size's vCPUs and memory, from the resource SKUs API.
type skuFacts struct {
	vcpus    int64
	memoryGB float64
	gpus     int64  // NVIDIA, from the capability GPUs
	arch     string // amd64 or arm64, as kubernetes.io/arch says it
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
				f := skuFacts{arch: "amd64"}
				for _, c := range s.Capabilities {
					switch str(c.Name) {
					case "vCPUs":
						f.vcpus, _ = strconv.ParseInt(str(c.Value), 10, 64)
					case "MemoryGB":
						f.memoryGB, _ = strconv.ParseFloat(str(c.Value), 64)
					case "GPUs":
						f.gpus, _ = strconv.ParseInt(str(c.Value), 10, 64)
					case "CpuArchitectureType":
						if strings.EqualFold(str(c.Value), "Arm64") {
							f.arch = "arm64"
						}
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

// TemplateNode implements cloud.NodeGroup. A set with a Ready Node copies
// it (cloud.TemplateFromNode, read at most every
// providerkit.LiveTemplateTTL), as the cluster autoscaler does. A set
// without one gets a node of its VM size (the resource SKUs API: vCPUs,
// memory, GPUs, architecture) with AKS's max pods and reservations
// (aksTemplateResources), in the set's location and first zone, with the AKS
// node-pool labels (kubernetes.azure.com/agentpool and agentpool, from the
// aks-managed-poolName tag), AKS's spot label and taint
// (kubernetes.azure.com/scalesetpriority=spot:NoSchedule) for a spot set,
// and the labels, taints and resources of the cluster autoscaler's
// node-template tags, which win.
func (g *NodeGroup) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	name := "template-" + strings.ReplaceAll(g.ID(), "/", "-")
	if live, err := g.p.live.Template(ctx, g.ID(), name, g.Nodes); err != nil || live != nil {
		return live, err
	}
	f := g.facts
	size, err := g.p.sku(ctx, f.location, f.sku)
	if err != nil {
		return nil, fmt.Errorf("scale set %s: %w", g.ID(), err)
	}
	tagLabels, tagTaints, extra, err := templateTags(f.tags)
	if err != nil {
		return nil, fmt.Errorf("scale set %s: %w", g.ID(), err)
	}
	capacity, allocatable := aksTemplateResources(size, f.podIPs)
	for r, q := range extra {
		capacity[r], allocatable[r] = q, q.DeepCopy()
	}
	location := strings.ToLower(f.location)
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelInstanceTypeStable: f.sku, corev1.LabelTopologyRegion: location,
		corev1.LabelOSStable: "linux", corev1.LabelArchStable: size.arch}
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
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable,
			NodeInfo:   corev1.NodeSystemInfo{Architecture: size.arch, OperatingSystem: "linux"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, nil
}

// podIPsOf counts the secondary IP configurations of a scale set's primary
// NIC: with Azure CNI (pods on the subnet's addresses), AKS pre-assigns each
// VM one per pod its kubelet may run, so their number is the pool's max
// pods. Kubenet and Azure CNI Overlay leave the NIC its primary
// configuration only (0).
func podIPsOf(np *armcompute.VirtualMachineScaleSetNetworkProfile) int {
	if np == nil {
		return 0
	}
	for _, nic := range np.NetworkInterfaceConfigurations {
		if nic.Properties == nil || (nic.Properties.Primary != nil && !*nic.Properties.Primary && len(np.NetworkInterfaceConfigurations) > 1) {
			continue
		}
		return max(0, len(nic.Properties.IPConfigurations)-1)
	}
	return 0
}

// aksReservedCPU is the CPU, in millicores, AKS reserves for the kubelet on a
// node of so many cores ("Resource reservations", AKS documentation).
var aksReservedCPU = []struct{ cores, milli int64 }{{1, 60}, {2, 100}, {4, 140}, {8, 180}, {16, 260}, {32, 420}, {64, 740}}

// aksTemplateResources is the capacity and allocatable of a new node of a
// VM size as AKS sets up its kubelet (Kubernetes 1.29 and later):
//   - pods: the set's pod IP configurations with Azure CNI (podIPsOf), else
//     110, the kubelet's and kubenet's default;
//   - nvidia.com/gpu: the size's GPUs;
//   - kube-reserved memory 20 MiB per pod + 50 MiB, at most 25 % of the
//     memory, and the eviction threshold memory.available 100 MiB;
//   - kube-reserved CPU by cores (aksReservedCPU; above 64 cores, 740m).
func aksTemplateResources(size skuFacts, podIPs int) (capacity, allocatable corev1.ResourceList) {
	pods := int64(110)
	if podIPs > 0 {
		pods = int64(podIPs)
	}
	memMiB := int64(math.Round(size.memoryGB * 1024))
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(size.vcpus, resource.DecimalSI),
		corev1.ResourceMemory: cloud.MiB(memMiB),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if size.gpus > 0 {
		capacity[cloud.NvidiaGPU] = *resource.NewQuantity(size.gpus, resource.DecimalSI)
	}
	cpu := aksReservedCPU[len(aksReservedCPU)-1].milli
	for _, r := range aksReservedCPU {
		if size.vcpus <= r.cores {
			cpu = r.milli
			break
		}
	}
	allocatable = capacity.DeepCopy()
	allocatable[corev1.ResourceCPU] = cloud.Milli(max(0, size.vcpus*1000-cpu))
	allocatable[corev1.ResourceMemory] = cloud.MiB(max(0, memMiB-min(20*pods+50, memMiB/4)-100))
	return capacity, allocatable
}
