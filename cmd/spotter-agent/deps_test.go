package main

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are package path prefixes that must never be linked into the agent:
// it runs on every spot node and must stay small (client-go only), and the
// cloud metadata emulators are test fixtures, never production code.
var forbidden = []string{
	"k8s.io/kubernetes",
	"sigs.k8s.io/controller-runtime",
	"k8s.io/apiserver",
	"spotter.dev/spotter/internal/emulator",
}

// agentPackages are checked besides the binary itself, so that the notice
// sources are held to the rule before they are wired into the binary.
var agentPackages = []string{".", "spotter.dev/spotter/internal/agent/..."}

// forbiddenDeps returns the packages of deps that start with a forbidden prefix.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

func TestAgentDependencies(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-deps"}, agentPackages...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps returned %d packages; expected the agent's full graph", len(deps))
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Errorf("spotter-agent links packages it must not (keep it client-go only):\n  %s", strings.Join(bad, "\n  "))
	}
}

// The checker itself must catch a forbidden package.
func TestForbiddenDepsDetects(t *testing.T) {
	got := forbiddenDeps([]string{"k8s.io/client-go/kubernetes", "k8s.io/kubernetes/pkg/scheduler", "k8s.io/kubernetes-extra/x",
		"spotter.dev/spotter/internal/agent/aws", "spotter.dev/spotter/internal/emulator/awsimds"})
	if len(got) != 2 || got[0] != "k8s.io/kubernetes/pkg/scheduler" || got[1] != "spotter.dev/spotter/internal/emulator/awsimds" {
		t.Errorf("forbiddenDeps = %v", got)
	}
}
