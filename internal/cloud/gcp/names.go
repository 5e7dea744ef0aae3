package gcp

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// instanceKey names an instance: project, zone and name, as a providerID
// gce://<project>/<zone>/<name> does.
type instanceKey struct{ project, zone, name string }

// providerID is the spec.providerID of the instance's Node.
func (k instanceKey) providerID() string { return "gce://" + k.project + "/" + k.zone + "/" + k.name }

// url is the instance's partial URL, as deleteInstances takes it.
func (k instanceKey) url() string {
	return "projects/" + k.project + "/zones/" + k.zone + "/instances/" + k.name
}

// InstanceKey returns the project, zone and name of a node's instance from
// its spec.providerID (gce://<project>/<zone>/<name>), and whether it is
// one.
func InstanceKey(node *corev1.Node) (project, zone, name string, ok bool) {
	k, ok := keyOf(node)
	return k.project, k.zone, k.name, ok
}

func keyOf(node *corev1.Node) (instanceKey, bool) {
	rest, ok := strings.CutPrefix(node.Spec.ProviderID, "gce://")
	if !ok {
		return instanceKey{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return instanceKey{}, false
	}
	return instanceKey{parts[0], parts[1], parts[2]}, true
}

// groupRef names a managed instance group: zonal (zone) or regional
// (region).
type groupRef struct{ project, zone, region, name string }

// id is the group's NodeGroup ID: <zone>/<name> or <region>/<name>.
func (r groupRef) id() string {
	if r.region != "" {
		return r.region + "/" + r.name
	}
	return r.zone + "/" + r.name
}

// path is the group's path within its project.
func (r groupRef) path() string {
	if r.region != "" {
		return "regions/" + r.region + "/instanceGroupManagers/" + r.name
	}
	return "zones/" + r.zone + "/instanceGroupManagers/" + r.name
}

// parseGroupRef reads .../[projects/<p>/]{zones/<z>|regions/<r>}/instanceGroupManagers/<name>
// (a URL, a path, or the created-by metadata of an instance); project is
// "" when the reference names none.
func parseGroupRef(s string) (groupRef, bool) {
	parts := strings.Split(strings.TrimSuffix(s, "/"), "/")
	n := len(parts)
	if n < 4 || parts[n-2] != "instanceGroupManagers" || parts[n-3] == "" || parts[n-1] == "" {
		return groupRef{}, false
	}
	r := groupRef{name: parts[n-1]}
	switch parts[n-4] {
	case "zones":
		r.zone = parts[n-3]
	case "regions":
		r.region = parts[n-3]
	default:
		return groupRef{}, false
	}
	if n >= 6 && parts[n-6] == "projects" {
		r.project = parts[n-5]
	}
	return r, true
}

// templateRef names an instance template: global (region "") or regional.
type templateRef struct{ project, region, name string }

// parseTemplateRef reads .../projects/<p>/{global|regions/<r>}/instanceTemplates/<name>.
func parseTemplateRef(s string) (templateRef, bool) {
	parts := strings.Split(s, "/")
	n := len(parts)
	if n < 5 || parts[n-2] != "instanceTemplates" || parts[n-1] == "" {
		return templateRef{}, false
	}
	r := templateRef{name: parts[n-1]}
	switch {
	case parts[n-3] == "global" && parts[n-5] == "projects":
		r.project = parts[n-4]
	case n >= 6 && parts[n-4] == "regions" && parts[n-6] == "projects":
		r.project, r.region = parts[n-5], parts[n-3]
	default:
		return templateRef{}, false
	}
	return r, true
}

func (r templateRef) key() string { return r.project + "/" + r.region + "/" + r.name }

// last returns what follows the last '/' of a URL (a zone's or machine
// type's name).
func last(url string) string { return url[strings.LastIndex(url, "/")+1:] }
