package v1alpha1

import (
	"strings"
	"testing"
)

func TestMetricsServing(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // "" means valid
	}{
		{"defaults: Kubernetes, self-signed", "", ""},
		{"plain HTTP on loopback", "manager:\n  metricsAuthentication: None\n  metricsBindAddress: 127.0.0.1:8080\n", ""},
		{"certificate directory", "agent:\n  metricsCertDir: /etc/spotter/tls\n", ""},
		{"unknown mode", "agent:\n  metricsAuthentication: Basic\n",
			`agent.metricsAuthentication: Unsupported value: "Basic": supported values: "Kubernetes", "None"`},
		{"certificate directory without HTTPS", "manager:\n  metricsAuthentication: None\n  metricsCertDir: /tls\n",
			`manager.metricsCertDir: Invalid value: "/tls": only used with metricsAuthentication: Kubernetes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Parse([]byte(header + tc.body))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got %v", errs.ToAggregate())
				}
				return
			}
			if c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("got %v, want one problem containing %s", errs.ToAggregate(), tc.want)
			}
		})
	}
	c, _ := Parse([]byte(header))
	if c.Manager.MetricsAuthentication != MetricsAuthKubernetes || c.Agent.MetricsAuthentication != MetricsAuthKubernetes || c.Manager.MetricsBindAddress != ":8443" {
		t.Errorf("defaults: manager %s on %s, agent %s; want Kubernetes on :8443 and Kubernetes",
			c.Manager.MetricsAuthentication, c.Manager.MetricsBindAddress, c.Agent.MetricsAuthentication)
	}
}
