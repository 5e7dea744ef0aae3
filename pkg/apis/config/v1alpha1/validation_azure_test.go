package v1alpha1

import (
	"strings"
	"testing"
)

func TestAzureProvider(t *testing.T) {
	const sub = "0b1f6471-1bf0-4dda-aec3-111122223333"
	const ok = "cloud:\n  provider: azure\n  azure:\n    subscriptionID: " + sub + "\n    resourceGroup: MC_prod_aks_westeurope\n    nodeGroups:\n"
	for _, tc := range []struct {
		name, body string
		want       []string // nil means valid
	}{
		{"a scale set", ok + "    - {scaleSet: aks-spot-12345678-vmss, maxSize: 10}\n", nil},
		{"by prefix and node pool, another group, an endpoint, an identity", ok +
			"    - {namePrefix: aks-, maxSize: 5}\n    - {nodePool: spotpool, resourceGroup: other.rg(1), minSize: 1, maxSize: 20}\n" +
			"    endpoint: http://127.0.0.1:8080\n    managedIdentityClientID: " + sub + "\n", nil},
		{"every entry with its group, none above", "cloud:\n  provider: azure\n  azure:\n    subscriptionID: " + sub + "\n    nodeGroups:\n" +
			"    - {scaleSet: vmss, resourceGroup: rg, maxSize: 1}\n", nil},
		{"neither subscription nor groups", "cloud:\n  provider: azure\n", []string{
			"cloud.azure.subscriptionID: Required value", "cloud.azure.nodeGroups: Required value"}},
		{"no resource group anywhere", "cloud:\n  provider: azure\n  azure:\n    subscriptionID: " + sub + "\n    nodeGroups:\n    - {scaleSet: vmss, maxSize: 1}\n", []string{
			"cloud.azure.nodeGroups[0].resourceGroup: Required value"}},
		{"two selectors, bad sizes", ok + "    - {namePrefix: aks-, nodePool: spot, minSize: 3, maxSize: 2}\n", []string{
			"cloud.azure.nodeGroups[0]: Invalid value: 2: set exactly one of scaleSet, namePrefix and nodePool",
			"cloud.azure.nodeGroups[0].maxSize: Invalid value: 2: must be at least 1 and at least minSize"}},
		{"no selector, no maximum", ok + "    - {minSize: -1}\n", []string{
			"cloud.azure.nodeGroups[0]: Invalid value: 0: set exactly one",
			"cloud.azure.nodeGroups[0].minSize: Invalid value: -1",
			"cloud.azure.nodeGroups[0].maxSize: Invalid value: 0"}},
		{"bad names", "cloud:\n  provider: azure\n  azure:\n    subscriptionID: nope\n    resourceGroup: rg.\n    nodeGroups:\n" +
			"    - {scaleSet: a/b, maxSize: 1}\n    - {namePrefix: 'a b', resourceGroup: 'x y', maxSize: 1}\n    managedIdentityClientID: me\n", []string{
			`cloud.azure.managedIdentityClientID: Invalid value: "me"`,
			`cloud.azure.nodeGroups[0].scaleSet: Invalid value: "a/b"`,
			`cloud.azure.nodeGroups[1].namePrefix: Invalid value: "a b"`,
			`cloud.azure.nodeGroups[1].resourceGroup: Invalid value: "x y"`,
			`cloud.azure.resourceGroup: Invalid value: "rg."`,
			`cloud.azure.subscriptionID: Invalid value: "nope"`}},
		{"an endpoint with credentials", ok + "    - {namePrefix: aks-, maxSize: 1}\n    endpoint: https://user:secret@proxy\n", []string{
			`cloud.azure.endpoint: Invalid value: "<redacted>"`}},
		{"a relative endpoint", ok + "    - {namePrefix: aks-, maxSize: 1}\n    endpoint: proxy:8080\n", []string{
			`cloud.azure.endpoint: Invalid value: "proxy:8080": must be an absolute http:// or https:// URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Parse([]byte(header + tc.body))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problem(s), want %d: %v", len(errs), len(tc.want), errs.ToAggregate())
			}
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("problems %q, want one containing %q", got, w)
				}
			}
		})
	}
}
