package v1alpha1

import (
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// azureSubscription is a subscription ID: a GUID.
var azureSubscription = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// azureResourceGroup is a resource group name as Azure accepts it: 1 to 90
// letters, digits, '_', '-', '.', '(' and ')', not ending in '.'.
var azureResourceGroup = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)

// azureScaleSet is a VM scale set name, or the start of one: 1 to 64
// letters, digits, '_', '-' and '.'.
var azureScaleSet = regexp.MustCompile(`^[-\w.]{1,64}$`)

// validateAzure checks the azure provider's section; required says the
// provider is azure (the section may be filled in for later and is then
// still checked).
func validateAzure(c *AzureConfig, required bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if required && c.SubscriptionID == "" {
		errs = append(errs, field.Required(p.Child("subscriptionID"), "the azure provider needs the ID of the subscription of the scale sets"))
	}
	if c.SubscriptionID != "" && !azureSubscription.MatchString(c.SubscriptionID) {
		errs = append(errs, field.Invalid(p.Child("subscriptionID"), c.SubscriptionID, "a subscription ID: a GUID such as 00000000-0000-0000-0000-000000000000"))
	}
	if c.ResourceGroup != "" && !azureResourceGroup.MatchString(c.ResourceGroup) {
		errs = append(errs, field.Invalid(p.Child("resourceGroup"), c.ResourceGroup, "a resource group name: 1 to 90 letters, digits, '_', '-', '.', '(' or ')', not ending in '.'"))
	}
	if required && len(c.NodeGroups) == 0 {
		errs = append(errs, field.Required(p.Child("nodeGroups"),
			"the azure provider needs the VM scale sets it may scale, with their sizes (scaleSet, namePrefix or nodePool, and maxSize)"))
	}
	for i, g := range c.NodeGroups {
		gp := p.Child("nodeGroups").Index(i)
		set := 0
		for _, v := range []string{g.ScaleSet, g.NamePrefix, g.NodePool} {
			if v != "" {
				set++
			}
		}
		if set != 1 {
			errs = append(errs, field.Invalid(gp, set, "set exactly one of scaleSet, namePrefix and nodePool"))
		}
		switch {
		case g.ResourceGroup == "" && c.ResourceGroup == "":
			errs = append(errs, field.Required(gp.Child("resourceGroup"), "the scale sets' resource group: here or in resourceGroup above"))
		case g.ResourceGroup != "" && !azureResourceGroup.MatchString(g.ResourceGroup):
			errs = append(errs, field.Invalid(gp.Child("resourceGroup"), g.ResourceGroup, "a resource group name: 1 to 90 letters, digits, '_', '-', '.', '(' or ')', not ending in '.'"))
		}
		if g.ScaleSet != "" && !azureScaleSet.MatchString(g.ScaleSet) {
			errs = append(errs, field.Invalid(gp.Child("scaleSet"), g.ScaleSet, "a VM scale set name: 1 to 64 letters, digits, '_', '-' or '.'"))
		}
		if g.NamePrefix != "" && !azureScaleSet.MatchString(g.NamePrefix) {
			errs = append(errs, field.Invalid(gp.Child("namePrefix"), g.NamePrefix, "the start of a VM scale set name: letters, digits, '_', '-' or '.'"))
		}
		if g.NodePool != "" && strings.TrimSpace(g.NodePool) != g.NodePool {
			errs = append(errs, field.Invalid(gp.Child("nodePool"), g.NodePool, "an AKS node pool's name, without spaces"))
		}
		if g.MinSize < 0 {
			errs = append(errs, field.Invalid(gp.Child("minSize"), g.MinSize, "must be at least 0"))
		}
		if g.MaxSize < 1 || g.MaxSize < g.MinSize {
			errs = append(errs, field.Invalid(gp.Child("maxSize"), g.MaxSize, "must be at least 1 and at least minSize (a VM scale set has no maximum of its own)"))
		}
	}
	if c.ManagedIdentityClientID != "" && !azureSubscription.MatchString(c.ManagedIdentityClientID) {
		errs = append(errs, field.Invalid(p.Child("managedIdentityClientID"), c.ManagedIdentityClientID, "a managed identity's client ID: a GUID"))
	}
	switch {
	case strings.Contains(c.Endpoint, "@"):
		// It may hold a password: say where, never what.
		errs = append(errs, field.Invalid(p.Child("endpoint"), "<redacted>", "must not hold credentials (user:password@) nor any '@'"))
	case c.Endpoint != "":
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child("endpoint"), c.Endpoint, "must be an absolute http:// or https:// URL, or empty for Azure's"))
		}
	}
	return errs
}
