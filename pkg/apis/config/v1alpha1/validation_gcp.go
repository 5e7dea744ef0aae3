package v1alpha1

import (
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// gcpGroupPath is a managed instance group's path within its project, as
// cloud.gcp.nodeGroups[].instanceGroupManager gives it (alone or at the end of
// a URL).
var gcpGroupPath = regexp.MustCompile(`(?:^|/)(zones|regions)/[a-z][-a-z0-9]*/instanceGroupManagers/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// gcpNamePrefix is the form of a Compute Engine resource name (RFC 1035 label),
// which a name prefix must be the start of.
var gcpNamePrefix = regexp.MustCompile(`^[a-z][-a-z0-9]{0,62}$`)

// validateGCP checks the gcp provider's section; required says the provider
// is gcp (the section may be filled in for later and is then still checked).
func validateGCP(c *GCPConfig, required bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if required && c.Project == "" {
		errs = append(errs, field.Required(p.Child("project"), "the gcp provider needs the ID of the project of the instances and managed instance groups"))
	}
	if c.Project != "" && (strings.TrimSpace(c.Project) != c.Project || strings.ContainsAny(c.Project, "/ ")) {
		errs = append(errs, field.Invalid(p.Child("project"), c.Project, "a project ID such as my-project-123, without '/' or spaces"))
	}
	if required && len(c.NodeGroups) == 0 {
		errs = append(errs, field.Required(p.Child("nodeGroups"),
			"the gcp provider needs the managed instance groups it may scale, with their sizes (instanceGroupManager, namePrefix or nodePool, and maxSize)"))
	}
	for i, g := range c.NodeGroups {
		gp := p.Child("nodeGroups").Index(i)
		set := 0
		for _, v := range []string{g.InstanceGroupManager, g.NamePrefix, g.NodePool} {
			if v != "" {
				set++
			}
		}
		if set != 1 {
			errs = append(errs, field.Invalid(gp, set, "set exactly one of instanceGroupManager, namePrefix and nodePool"))
		}
		if g.InstanceGroupManager != "" && !gcpGroupPath.MatchString(g.InstanceGroupManager) {
			errs = append(errs, field.Invalid(gp.Child("instanceGroupManager"), g.InstanceGroupManager,
				"zones/<zone>/instanceGroupManagers/<name>, regions/<region>/instanceGroupManagers/<name>, or the group's URL"))
		}
		if g.NamePrefix != "" && !gcpNamePrefix.MatchString(g.NamePrefix) {
			errs = append(errs, field.Invalid(gp.Child("namePrefix"), g.NamePrefix, "the start of a Compute Engine name: a lowercase letter, then lowercase letters, digits and '-'"))
		}
		if g.NodePool != "" && strings.TrimSpace(g.NodePool) != g.NodePool {
			errs = append(errs, field.Invalid(gp.Child("nodePool"), g.NodePool, "a GKE node pool's name, without spaces"))
		}
		if g.MinSize < 0 {
			errs = append(errs, field.Invalid(gp.Child("minSize"), g.MinSize, "must be at least 0"))
		}
		if g.MaxSize < 1 || g.MaxSize < g.MinSize {
			errs = append(errs, field.Invalid(gp.Child("maxSize"), g.MaxSize, "must be at least 1 and at least minSize (a managed instance group has no maximum of its own)"))
		}
	}
	switch {
	case strings.Contains(c.Endpoint, "@"):
		// It may hold a password: say where, never what.
		errs = append(errs, field.Invalid(p.Child("endpoint"), "<redacted>", "must not hold credentials (user:password@) nor any '@'"))
	case c.Endpoint != "":
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child("endpoint"), c.Endpoint, "must be an absolute http:// or https:// URL, or empty for Google's"))
		}
	}
	return errs
}
