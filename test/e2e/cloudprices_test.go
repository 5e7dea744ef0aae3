package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/cli"
	"spotter.dev/spotter/internal/plan"
)

// planWithout runs `spotter plan -o json` on the cluster of kubeconfig with
// the configuration at config less its line drop (a configured price), so that the price comes from
// the cloud, and returns the plan.
func planWithout(t *testing.T, kubeconfig, config, drop string) *plan.Plan {
	t.Helper()
	body, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), drop) {
		t.Fatalf("the configuration has no line %q", drop)
	}
	path := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(body), drop, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--config", path, "-o", "json", "--kubeconfig", kubeconfig},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p plan.Plan
	if code != 0 || json.Unmarshal(out.Bytes(), &p) != nil {
		t.Fatalf("spotter plan: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	return &p
}
