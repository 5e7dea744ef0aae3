// Package kubeclient counts the requests Spotter sends to the apiserver, by verb
// (get, list, watch, create, update, patch, delete), as the metric
// spotter_apiserver_requests_total: the figure that shows a controller reading
// from its caches and not LISTing in steady state.
package kubeclient

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "spotter", Name: "apiserver_requests_total",
	Help: "Requests sent to the Kubernetes apiserver, by verb.",
}, []string{"verb"})

func init() { metrics.Registry.MustRegister(requests) }

// Count makes every client built from cfg count its requests.
func Count(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counter{rt} })
}

type counter struct{ next http.RoundTripper }

func (c counter) RoundTrip(req *http.Request) (*http.Response, error) {
	requests.WithLabelValues(Verb(req)).Inc()
	return c.next.RoundTrip(req)
}

// Verb names a request the way the apiserver's audit log does.
func Verb(req *http.Request) string {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		if req.URL.Query().Get("watch") == "true" {
			return "watch"
		}
		if collection(req.URL.Path) {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(req.Method)
}

// collection reports whether an API path names a collection of objects
// (/api/v1/pods, /apis/apps/v1/namespaces/x/deployments) rather than one
// object or subresource.
func collection(path string) bool {
	parts, ok := resourceParts(path)
	return ok && len(parts) == 1
}

// Resource returns the resource an API path names, with its subresource
// ("pods", "pods/eviction", "nodes"); "" for a path outside /api and /apis
// or naming none.
func Resource(path string) string {
	parts, ok := resourceParts(path)
	switch {
	case !ok || len(parts) == 0:
		return ""
	case len(parts) >= 3:
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}

// resourceParts returns what follows the group, version and namespace of an
// API path: resource, name, subresource; ok is false outside /api and /apis.
func resourceParts(path string) (parts []string, ok bool) {
	parts = strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return nil, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return parts, true
}
