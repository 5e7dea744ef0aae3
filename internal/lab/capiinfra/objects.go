package capiinfra

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"spotter.dev/spotter/internal/lab"
)

// MachineSpec is the spec of a LabMachine, and spec.template.spec of a
// LabMachineTemplate. Zero fields take lab.Node's defaults.
type MachineSpec struct {
	InstanceType string
	Zone         string
	// Spot sets spec.spotMarketOptions (with MaxPrice, when set).
	Spot     bool
	MaxPrice string
	CPU      string
	Memory   string
	Pods     string
	// NodeLabels are added to the Node's labels, over the derived ones.
	NodeLabels map[string]string
}

// object returns the spec as unstructured content.
func (s MachineSpec) object() map[string]any {
	out := map[string]any{}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("instanceType", s.InstanceType)
	set("zone", s.Zone)
	if s.Spot {
		opts := map[string]any{}
		if s.MaxPrice != "" {
			opts["maxPrice"] = s.MaxPrice
		}
		out["spotMarketOptions"] = opts
	}
	capacity := map[string]any{}
	for k, v := range map[string]string{"cpu": s.CPU, "memory": s.Memory, "pods": s.Pods} {
		if v != "" {
			capacity[k] = v
		}
	}
	if len(capacity) > 0 {
		out["capacity"] = capacity
	}
	if len(s.NodeLabels) > 0 {
		labels := map[string]any{}
		for k, v := range s.NodeLabels {
			labels[k] = v
		}
		out["nodeLabels"] = labels
	}
	return out
}

// machineSpecOf reads a MachineSpec from obj at the path of fields.
func machineSpecOf(obj map[string]any, fields ...string) (MachineSpec, error) {
	m, _, err := unstructured.NestedMap(obj, fields...)
	if err != nil {
		return MachineSpec{}, err
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	s := MachineSpec{InstanceType: str("instanceType"), Zone: str("zone")}
	if opts, ok := m["spotMarketOptions"].(map[string]any); ok {
		s.Spot = true
		s.MaxPrice, _ = opts["maxPrice"].(string)
	}
	if c, ok := m["capacity"].(map[string]any); ok {
		// int-or-string: a number arrives as int64.
		q := func(k string) string {
			if v, ok := c[k]; ok && v != nil {
				return fmt.Sprint(v)
			}
			return ""
		}
		s.CPU, s.Memory, s.Pods = q("cpu"), q("memory"), q("pods")
	}
	if labels, ok := m["nodeLabels"].(map[string]any); ok {
		s.NodeLabels = map[string]string{}
		for k, v := range labels {
			s.NodeLabels[k], _ = v.(string)
		}
	}
	return s, nil
}

// nodeSpec is the kwok Node of a machine with this spec.
func (s MachineSpec) nodeSpec(name, providerID string) lab.NodeSpec {
	class := lab.ClassOnDemand
	if s.Spot {
		class = lab.ClassSpot
	}
	return lab.NodeSpec{
		Name: name, Class: class, ProviderID: providerID,
		CPU: s.CPU, Memory: s.Memory, Pods: s.Pods,
		Zone: s.Zone, InstanceType: s.InstanceType, Labels: s.NodeLabels,
	}
}

// BootstrapDataSecretName is the spec.bootstrap.dataSecretName of the Machines
// NewMachineDeployment makes. Cluster API requires a bootstrap and takes a
// named Secret as given; the lab provider waits for the name, as the contract
// says, and never reads the Secret.
const BootstrapDataSecretName = "lab-bootstrap-data"

// NewCluster returns a Cluster of the lab, with its LabCluster and its
// LabControlPlane, all named name.
func NewCluster(namespace, name string) (cluster, labCluster, labControlPlane *unstructured.Unstructured) {
	labCluster = newUnstructured(LabClusterGVK)
	labCluster.SetNamespace(namespace)
	labCluster.SetName(name)
	labCluster.Object["spec"] = map[string]any{}

	labControlPlane = newUnstructured(LabControlPlaneGVK)
	labControlPlane.SetNamespace(namespace)
	labControlPlane.SetName(name)
	labControlPlane.Object["spec"] = map[string]any{}

	cluster = newUnstructured(ClusterGVK)
	cluster.SetNamespace(namespace)
	cluster.SetName(name)
	cluster.Object["spec"] = map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": Group, "kind": KindCluster, "name": name},
		"controlPlaneRef":   map[string]any{"apiGroup": ControlPlaneGroup, "kind": KindControlPlane, "name": name},
	}
	return cluster, labCluster, labControlPlane
}

// NewMachineTemplate returns a LabMachineTemplate.
func NewMachineTemplate(namespace, name string, spec MachineSpec) *unstructured.Unstructured {
	t := newUnstructured(LabMachineTemplateGVK)
	t.SetNamespace(namespace)
	t.SetName(name)
	t.Object["spec"] = map[string]any{"template": map[string]any{"spec": spec.object()}}
	return t
}

// NewMachineDeployment returns a MachineDeployment of replicas Machines of the
// cluster, made from the LabMachineTemplate named template. It carries what
// Cluster API's defaulting webhook would add, as the lab does not run it: the
// cluster-name label, a selector on the cluster and deployment names (also on
// the template), and a rolling update that adds a Machine before it removes one.
func NewMachineDeployment(namespace, name, cluster, template string, replicas int32) *unstructured.Unstructured {
	md := newUnstructured(MachineDeploymentGVK)
	md.SetNamespace(namespace)
	md.SetName(name)
	labels := map[string]any{ClusterNameLabel: cluster, MachineDeploymentNameLabel: name}
	md.SetLabels(map[string]string{ClusterNameLabel: cluster})
	md.Object["spec"] = map[string]any{
		"clusterName": cluster,
		"replicas":    int64(replicas),
		"selector":    map[string]any{"matchLabels": labels},
		"rollout": map[string]any{"strategy": map[string]any{
			"type":          "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)},
		}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{
				"clusterName":       cluster,
				"bootstrap":         map[string]any{"dataSecretName": BootstrapDataSecretName},
				"infrastructureRef": map[string]any{"apiGroup": Group, "kind": KindMachineTemplate, "name": template},
			},
		},
	}
	return md
}

// NewMachinePool returns a MachinePool of replicas instances of the cluster,
// on the LabMachinePool named infra. It carries what Cluster API's defaulting
// webhook would add, as the lab does not run it: the cluster-name label and
// the replicas.
func NewMachinePool(namespace, name, cluster, infra string, replicas int32) *unstructured.Unstructured {
	mp := newUnstructured(MachinePoolGVK)
	mp.SetNamespace(namespace)
	mp.SetName(name)
	mp.SetLabels(map[string]string{ClusterNameLabel: cluster})
	mp.Object["spec"] = map[string]any{
		"clusterName": cluster,
		"replicas":    int64(replicas),
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{ClusterNameLabel: cluster}},
			"spec": map[string]any{
				"clusterName":       cluster,
				"bootstrap":         map[string]any{"dataSecretName": BootstrapDataSecretName},
				"infrastructureRef": map[string]any{"apiGroup": Group, "kind": KindMachinePool, "name": infra},
			},
		},
	}
	return mp
}

// NewLabMachinePool returns a LabMachinePool whose instances have spec; with
// machines, each is also a LabMachine for which Cluster API makes a Machine
// (MachinePool Machines).
func NewLabMachinePool(namespace, name string, spec MachineSpec, machines bool) *unstructured.Unstructured {
	p := newUnstructured(LabMachinePoolGVK)
	p.SetNamespace(namespace)
	p.SetName(name)
	p.Object["spec"] = map[string]any{"template": spec.object(), "machinePoolMachines": machines}
	return p
}
