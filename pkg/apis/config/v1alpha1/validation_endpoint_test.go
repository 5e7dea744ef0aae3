package v1alpha1

import (
	"strings"
	"testing"
)

func TestMetadataEndpointCredentialsNeverEchoed(t *testing.T) {
	_, errs := Parse([]byte(header + "agent:\n  metadataEndpoint: http://admin:hunter2@169.254.169.254\n"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "agent.metadataEndpoint") || !strings.Contains(errs[0].Error(), "credentials") {
		t.Fatalf("got %v, want one problem naming agent.metadataEndpoint and credentials", errs.ToAggregate())
	}
	if strings.Contains(errs.ToAggregate().Error(), "hunter2") {
		t.Fatalf("the password is echoed: %v", errs.ToAggregate())
	}
}
