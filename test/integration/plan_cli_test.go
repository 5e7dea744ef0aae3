package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/cli"
	"spotter.dev/spotter/internal/testenv"
)

func runSpotter(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Main(args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// Connection and permission problems give one clear line and exit 1.
func TestPlanConnectionAndPermissionErrors(t *testing.T) {
	env := testenv.StartAPIServer(t)

	nobody, err := env.UserKubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runSpotter("plan", "--kubeconfig", nobody)
	if code != 1 || out != "" {
		t.Errorf("forbidden: exit %d, stdout %q", code, out)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 ||
		!strings.Contains(errOut, "error: not allowed to list nodes at "+env.Server) ||
		!strings.Contains(errOut, "spotter plan needs get and list on nodes, pods") {
		t.Errorf("forbidden: want one line naming the resource and the permissions, got:\n%s", errOut)
	}

	// A server that does not answer: the lab's kubeconfig with a dead port.
	data, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "dead.kubeconfig")
	if err := os.WriteFile(dead, []byte(strings.ReplaceAll(string(data), env.Server, "https://127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runSpotter("plan", "--kubeconfig", dead)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
		!strings.Contains(errOut, "error: cannot reach the API server at https://127.0.0.1:1") {
		t.Errorf("unreachable: exit %d, want one line, got:\n%s", code, errOut)
	}

	code, _, errOut = runSpotter("plan", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || !strings.Contains(errOut, "loading kubeconfig") {
		t.Errorf("missing kubeconfig: exit %d, %q", code, errOut)
	}
	code, _, errOut = runSpotter("plan", "--kubeconfig", env.Kubeconfig, "-o", "xml")
	if code != 1 || !strings.Contains(errOut, "use table, json or yaml") {
		t.Errorf("bad output: exit %d, %q", code, errOut)
	}

	// The admin sees an empty cluster and gets a table.
	code, out, errOut = runSpotter("plan", "--kubeconfig", env.Kubeconfig)
	if code != 0 || !strings.Contains(out, "0 of 0 on-demand nodes could be emptied") {
		t.Errorf("admin: exit %d\n%s\n%s", code, out, errOut)
	}
}
