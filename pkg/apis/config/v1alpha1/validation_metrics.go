package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateMetricsServing checks how a metrics endpoint is guarded. p is the
// parent path (manager or agent).
func validateMetricsServing(p *field.Path, addr string, auth MetricsAuthentication, certDir string) field.ErrorList {
	errs := oneOf(p.Child("metricsAuthentication"), auth, MetricsAuthKubernetes, MetricsAuthNone)
	if certDir != "" && auth != MetricsAuthKubernetes && addr != "0" {
		errs = append(errs, field.Invalid(p.Child("metricsCertDir"), certDir,
			"only used with metricsAuthentication: Kubernetes (HTTPS); remove it, or set metricsAuthentication to Kubernetes"))
	}
	return errs
}
