package gcp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// templateFacts is what the provider reads of an instance template
// (immutable: cached for good).
type templateFacts struct {
	machineType       string
	spot, preemptible bool
	labels            map[string]string // Compute Engine labels
	gpus              int64             // attached accelerators (guestAccelerators)
	kubeEnv           kubeEnv
	kubeEnvErr        error // a kube-env that does not parse
}

// kubeEnv is what the template node takes from the kube-env metadata GKE
// writes.
type kubeEnv struct {
	labels   map[string]string
	taints   []corev1.Taint
	reserved corev1.ResourceList // nil: not said
	maxPods  int64               // the kubelet's --max-pods; 0: not said
}

// template reads the instance template at url (global or regional),
// cached.
func (p *Provider) template(ctx context.Context, url string) (*templateFacts, error) {
	ref, ok := parseTemplateRef(url)
	if !ok {
		return nil, fmt.Errorf("instance template %q: not a template URL", url)
	}
	p.mu.Lock()
	f, ok := p.templates[ref.key()]
	p.mu.Unlock()
	if ok {
		return f, nil
	}
	var t *computepb.InstanceTemplate
	var err error
	if ref.region != "" {
		t, err = p.c.RegionalTemplates.Get(ctx, &computepb.GetRegionInstanceTemplateRequest{Project: ref.project, Region: ref.region, InstanceTemplate: ref.name})
	} else {
		t, err = p.c.Templates.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: ref.project, InstanceTemplate: ref.name})
	}
	if err != nil {
		return nil, fmt.Errorf("reading instance template %s: %w", ref.name, mapError("", err))
	}
	props := t.GetProperties()
	f = &templateFacts{machineType: last(props.GetMachineType()), spot: isSpot(props.GetScheduling()),
		preemptible: props.GetScheduling().GetPreemptible(), labels: maps.Clone(props.GetLabels())}
	for _, a := range props.GetGuestAccelerators() {
		f.gpus += int64(a.GetAcceleratorCount())
	}
	for _, item := range props.GetMetadata().GetItems() {
		if item.GetKey() == KubeEnvKey {
			f.kubeEnv, f.kubeEnvErr = parseKubeEnv(item.GetValue())
		}
	}
	p.mu.Lock()
	p.templates[ref.key()] = f
	p.mu.Unlock()
	return f, nil
}

// parseKubeEnv reads the labels, taints, reserved resources and max pods of
// a GKE kube-env: a YAML map whose AUTOSCALER_ENV_VARS
// ("node_labels=a=b,c=d;node_taints=k=v:NoSchedule;kube_reserved=cpu=100m,...")
// the cluster autoscaler reads first, whose NODE_LABELS and NODE_TAINTS
// (same lists) it falls back on (cluster-autoscaler, gce/templates.go), and
// whose KUBELET_ARGS carry the kubelet's --max-pods.
func parseKubeEnv(s string) (kubeEnv, error) {
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return kubeEnv{}, fmt.Errorf("kube-env: %w", err)
	}
	vars := map[string]string{}
	if v := strings.TrimSpace(doc["AUTOSCALER_ENV_VARS"].Value); v != "" {
		for _, kv := range strings.Split(v, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return kubeEnv{}, fmt.Errorf("kube-env: AUTOSCALER_ENV_VARS: %q is not name=value", kv)
			}
			vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(val), `"'`)
		}
	}
	pick := func(autoscalerName, fallback string) string {
		if v, ok := vars[autoscalerName]; ok {
			return v
		}
		return doc[fallback].Value
	}
	var env kubeEnv
	var err error
	if env.labels, err = keyValues(pick("node_labels", "NODE_LABELS")); err != nil {
		return kubeEnv{}, fmt.Errorf("kube-env: node labels: %w", err)
	}
	taints, err := keyValues(pick("node_taints", "NODE_TAINTS"))
	if err != nil {
		return kubeEnv{}, fmt.Errorf("kube-env: node taints: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(taints)) {
		value, effect, ok := strings.Cut(taints[k], ":")
		switch e := corev1.TaintEffect(effect); {
		case !ok:
			return kubeEnv{}, fmt.Errorf("kube-env: taint %s=%s: want key=value:effect", k, taints[k])
		case e != corev1.TaintEffectNoSchedule && e != corev1.TaintEffectPreferNoSchedule && e != corev1.TaintEffectNoExecute:
			return kubeEnv{}, fmt.Errorf("kube-env: taint %s=%s: unknown effect %q", k, taints[k], effect)
		}
		env.taints = append(env.taints, corev1.Taint{Key: k, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	reserved, err := keyValues(vars["kube_reserved"])
	if err != nil {
		return kubeEnv{}, fmt.Errorf("kube-env: kube_reserved: %w", err)
	}
	for name, v := range reserved {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return kubeEnv{}, fmt.Errorf("kube-env: kube_reserved %s=%s: not a quantity", name, v)
		}
		if env.reserved == nil {
			env.reserved = corev1.ResourceList{}
		}
		env.reserved[corev1.ResourceName(name)] = q
	}
	for _, arg := range strings.Fields(doc["KUBELET_ARGS"].Value) {
		if v, ok := strings.CutPrefix(arg, "--max-pods="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return kubeEnv{}, fmt.Errorf("kube-env: KUBELET_ARGS: --max-pods=%s is not a positive number", v)
			}
			env.maxPods = n
		}
	}
	return env, nil
}

// keyValues reads "a=b,c=d" (a value may hold '=').
func keyValues(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// machineType reads a machine type's size in zone, cached by name (a
// machine type is the same size in every zone).
func (p *Provider) machineType(ctx context.Context, zone, name string) (machineFacts, error) {
	p.mu.Lock()
	f, ok := p.machineTypes[name]
	p.mu.Unlock()
	if ok {
		return f, nil
	}
	mt, err := p.c.MachineTypes.Get(ctx, &computepb.GetMachineTypeRequest{Project: p.opts.Project, Zone: zone, MachineType: name})
	if err != nil {
		return machineFacts{}, fmt.Errorf("reading machine type %s in %s: %w", name, zone, mapError("", err))
	}
	f = machineFacts{cpus: mt.GetGuestCpus(), memMB: mt.GetMemoryMb(), arch: "amd64"}
	if mt.GetArchitecture() == computepb.MachineType_ARM64.String() {
		f.arch = "arm64"
	}
	for _, a := range mt.GetAccelerators() {
		f.gpus += int64(a.GetGuestAcceleratorCount())
	}
	p.mu.Lock()
	p.machineTypes[name] = f
	p.mu.Unlock()
	return f, nil
}

// TemplateNode implements cloud.NodeGroup. A group with a Ready Node copies
// it (cloud.TemplateFromNode, read at most every
// providerkit.LiveTemplateTTL), as the cluster autoscaler does. A group
// without one gets a node of the template's machine type
// (machineTypes.get: CPU, memory, architecture, built-in GPUs) with the
// template's attached GPUs, in the group's first zone, with the labels,
// taints, reserved resources and max pods of the template's kube-env
// (GKE's; gkeAllocatable where it reserves nothing), the GKE node-pool label
// (from the template's goog-k8s-node-pool-name label) and the GKE spot or
// preemptible label when the template asks for them.
func (g *NodeGroup) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	name := "template-" + strings.ReplaceAll(g.ID(), "/", "-")
	if live, err := g.p.live.Template(ctx, g.ID(), name, g.Nodes); err != nil || live != nil {
		return live, err
	}
	t := g.template
	if t.kubeEnvErr != nil {
		return nil, fmt.Errorf("managed instance group %s: %w", g.ID(), t.kubeEnvErr)
	}
	if len(g.zones) == 0 {
		return nil, fmt.Errorf("managed instance group %s has no zone", g.ID())
	}
	zone := g.zones[0]
	size, err := g.p.machineType(ctx, zone, t.machineType)
	if err != nil {
		return nil, err
	}
	capacity, allocatable := gkeTemplateResources(size, t)
	region := zone
	if i := strings.LastIndex(zone, "-"); i > 0 {
		region = zone[:i]
	}
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelInstanceTypeStable: t.machineType, corev1.LabelTopologyZone: zone,
		corev1.LabelTopologyRegion: region, corev1.LabelOSStable: "linux", corev1.LabelArchStable: size.arch}
	maps.Copy(labels, t.kubeEnv.labels)
	if pool := t.labels[NodePoolNameLabel]; pool != "" && labels[NodePoolLabel] == "" {
		labels[NodePoolLabel] = pool
	}
	switch {
	case t.preemptible && labels[PreemptibleLabel] == "":
		labels[PreemptibleLabel] = "true"
	case t.spot && !t.preemptible && labels[SpotLabel] == "":
		labels[SpotLabel] = "true"
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: slices.Clone(t.kubeEnv.taints)},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable,
			NodeInfo:   corev1.NodeSystemInfo{Architecture: size.arch, OperatingSystem: "linux"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, nil
}

// gkeTemplateResources is the capacity and allocatable of a new node of
// machine type m from template t, as GKE sets up its kubelet ("Node
// allocatable resources", GKE documentation):
//   - pods: the kube-env's --max-pods, else 110, GKE's default;
//   - nvidia.com/gpu: the template's attached GPUs, else the machine type's
//     built-in ones;
//   - allocatable = capacity - kube-reserved - the eviction threshold
//     (memory.available 100 MiB). kube-reserved is the kube-env's
//     kube_reserved when it says one, else GKE's tiers: memory 255 MiB on a
//     machine under 1 GiB, else 25 % of the first 4 GiB, 20 % of the next 4,
//     10 % of the next 8, 6 % of the next 112 and 2 % above 128 GiB; CPU
//     providerkit.TieredCPUReserve.
func gkeTemplateResources(m machineFacts, t *templateFacts) (capacity, allocatable corev1.ResourceList) {
	pods := int64(110)
	if t.kubeEnv.maxPods > 0 {
		pods = t.kubeEnv.maxPods
	}
	memMiB := int64(m.memMB)
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(m.cpus), resource.DecimalSI),
		corev1.ResourceMemory: cloud.MiB(memMiB),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if gpus := cmp.Or(t.gpus, m.gpus); gpus > 0 {
		capacity[cloud.NvidiaGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	reserved := t.kubeEnv.reserved
	if reserved == nil {
		reserved = corev1.ResourceList{
			corev1.ResourceCPU:    cloud.Milli(providerkit.TieredCPUReserve(int64(m.cpus))),
			corev1.ResourceMemory: cloud.MiB(gkeReservedMemoryMiB(memMiB)),
		}
	}
	allocatable = capacity.DeepCopy()
	for r, q := range reserved {
		if a, ok := allocatable[r]; ok {
			a.Sub(q)
			allocatable[r] = a
		}
	}
	mem := allocatable[corev1.ResourceMemory]
	mem.Sub(cloud.MiB(100))
	allocatable[corev1.ResourceMemory] = mem
	return capacity, allocatable
}

// gkeReservedMemoryMiB is the memory GKE reserves for the kubelet and the
// system on a machine of memMiB (gkeTemplateResources).
func gkeReservedMemoryMiB(memMiB int64) int64 {
	if memMiB < 1024 {
		return 255
	}
	tiers := []struct{ upTo, percent int64 }{{4 << 10, 25}, {8 << 10, 20}, {16 << 10, 10}, {128 << 10, 6}, {math.MaxInt64, 2}}
	var reserved, from int64
	for _, t := range tiers {
		if memMiB <= from {
			break
		}
		reserved += (min(memMiB, t.upTo) - from) * t.percent / 100
		from = t.upTo
	}
	return reserved
}
