package kubeclient

import (
	"net/http"
	"net/url"
	"testing"
)

func TestVerb(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "/api/v1/nodes", "list"},
		{"GET", "/api/v1/nodes?watch=true&resourceVersion=5", "watch"},
		{"GET", "/api/v1/nodes/n1", "get"},
		{"GET", "/api/v1/namespaces/default/pods", "list"},
		{"GET", "/api/v1/namespaces/default/pods/p", "get"},
		{"GET", "/api/v1/namespaces", "list"},
		{"GET", "/api/v1/namespaces/default", "get"},
		{"GET", "/apis/apps/v1/namespaces/x/replicasets", "list"},
		{"GET", "/apis/apps/v1/replicasets", "list"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/spotter", "get"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/spotter", "update"},
		{"POST", "/api/v1/namespaces/default/pods/p/eviction", "create"},
		{"PATCH", "/api/v1/nodes/n1", "patch"},
		{"DELETE", "/api/v1/namespaces/default/pods/p", "delete"},
		{"GET", "/version", "get"},
	} {
		u, _ := url.Parse(tc.url)
		if got := Verb(&http.Request{Method: tc.method, URL: u}); got != tc.want {
			t.Errorf("%s %s = %s, want %s", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/nodes":      "nodes",
		"/api/v1/nodes/od-1": "nodes",
		"/api/v1/namespaces/default/pods/web-1/eviction":                     "pods/eviction",
		"/api/v1/namespaces/default/pods":                                    "pods",
		"/apis/events.k8s.io/v1/namespaces/default/events":                   "events",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/spotter": "leases",
		"/api/v1/namespaces/default":                                         "namespaces",
		"/api/v1/namespaces":                                                 "namespaces",
		"/healthz":                                                           "",
		"/apis":                                                              "",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}
