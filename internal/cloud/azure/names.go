package azure

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ARM resource IDs are case-insensitive (AKS writes the node resource group
// of its providerIDs in lowercase): keys hold them lowercase.

// setKey names a VM scale set.
type setKey struct{ sub, rg, name string }

func newSetKey(sub, rg, name string) setKey {
	return setKey{strings.ToLower(sub), strings.ToLower(rg), strings.ToLower(name)}
}

// id is the scale set's NodeGroup ID: <resource group>/<name>, lowercase.
func (k setKey) id() string { return k.rg + "/" + k.name }

// resourceID is the scale set's ARM resource ID (lowercase).
func (k setKey) resourceID() string {
	return "/subscriptions/" + k.sub + "/resourcegroups/" + k.rg + "/providers/microsoft.compute/virtualmachinescalesets/" + k.name
}

// vmKey names a VM: a Uniform scale set's by set and instance ID, any other
// (a Flexible set's or a standalone VM) by resource group and name.
type vmKey struct {
	set  setKey // name "" for a VM that is not a Uniform set's
	sub  string
	rg   string
	name string // the instance ID of a Uniform set's VM
}

func (k vmKey) uniform() bool { return k.set.name != "" }

// resourceID is the VM's ARM resource ID (lowercase).
func (k vmKey) resourceID() string {
	if k.uniform() {
		return k.set.resourceID() + "/virtualmachines/" + k.name
	}
	return "/subscriptions/" + k.sub + "/resourcegroups/" + k.rg + "/providers/microsoft.compute/virtualmachines/" + k.name
}

// keyOfID reads an ARM resource ID of a VM (or a providerID, azure:// and
// the ID): .../virtualMachineScaleSets/<set>/virtualMachines/<instance ID>
// or .../virtualMachines/<name>.
func keyOfID(id string) (vmKey, bool) {
	parts := strings.Split(strings.ToLower(strings.TrimPrefix(id, "azure://")), "/")
	if len(parts) < 9 || parts[0] != "" || parts[1] != "subscriptions" || parts[3] != "resourcegroups" || parts[5] != "providers" || parts[6] != "microsoft.compute" {
		return vmKey{}, false
	}
	sub, rg := parts[2], parts[4]
	switch {
	case len(parts) == 9 && parts[7] == "virtualmachines" && parts[8] != "":
		return vmKey{sub: sub, rg: rg, name: parts[8]}, sub != "" && rg != ""
	case len(parts) == 11 && parts[7] == "virtualmachinescalesets" && parts[9] == "virtualmachines" && parts[8] != "" && parts[10] != "":
		return vmKey{set: setKey{sub, rg, parts[8]}, sub: sub, rg: rg, name: parts[10]}, sub != "" && rg != ""
	}
	return vmKey{}, false
}

// keyOf is the VM of a node, from its spec.providerID.
func keyOf(node *corev1.Node) (vmKey, bool) {
	if !strings.HasPrefix(node.Spec.ProviderID, "azure://") {
		return vmKey{}, false
	}
	return keyOfID(node.Spec.ProviderID)
}

// setKeyOfID reads a scale set's ARM resource ID.
func setKeyOfID(id string) (setKey, bool) {
	parts := strings.Split(strings.ToLower(id), "/")
	if len(parts) != 9 || parts[1] != "subscriptions" || parts[3] != "resourcegroups" || parts[7] != "virtualmachinescalesets" || parts[8] == "" {
		return setKey{}, false
	}
	return setKey{parts[2], parts[4], parts[8]}, true
}

// IsAzureNode reports whether node's spec.providerID names an Azure VM.
func IsAzureNode(node *corev1.Node) bool {
	_, ok := keyOf(node)
	return ok
}

// str is *s, or "" for nil (the SDK's models are all pointers).
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
