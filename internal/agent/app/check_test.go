package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/agent/aws"
	"spotter.dev/spotter/internal/agent/azure"
	"spotter.dev/spotter/internal/agent/gcp"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/emulator/azureimds"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// refuser is a metadata emulator that can refuse every read.
type refuser interface {
	http.Handler
	RefuseReads(bool)
}

// checkCloud is a cloud whose notice path --check probes, with the paths its
// failure must name when the metadata service refuses every read.
type checkCloud struct {
	cloud string
	emu   refuser
	// unreachable are the URL paths a refused probe names: the first read
	// that fails (AWS: the session token, without which no item is read)
	// or every notice path (GCP).
	unreachable []string
}

// spotterAzureProviderID names the scale-set VM aks-spot-vmss_3, so that the
// Azure source does not read the VM's name.
const spotterAzureProviderID = "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-spot-vmss/virtualMachines/3"

// --check against a real apiserver and the metadata emulators: it reads the
// node, probes the notice paths of the cloud and sends the node with every
// mark of a termination notice as a server-side dry-run update. It passes
// when both answer, changing nothing; it fails naming the URL of each path
// that a refusing metadata service left unread, and naming the node update
// that RBAC refuses, the other step still run and reported.
func TestCheck(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, lab.Node(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, ProviderID: spotterAzureProviderID}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gcpEmu := gcpmetadata.New(gcpmetadata.Options{})
	t.Cleanup(gcpEmu.Close)
	clouds := []checkCloud{
		{"aws", awsimds.New(awsimds.Options{}), []string{aws.TokenPath}},
		{"gcp", gcpEmu, []string{gcp.PreemptedPath, gcp.MaintenanceEventPath}},
		{"azure", azureimds.New(azureimds.Options{VMName: "aks-spot-vmss_3"}), []string{azure.ScheduledEventsPath}},
	}
	endpoints := map[string]string{}
	for _, c := range clouds {
		srv := httptest.NewServer(c.emu)
		t.Cleanup(srv.Close)
		endpoints[c.cloud] = srv.URL
	}
	check := func(kubeconfig, node, cloud string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(ctx, []string{"--kubeconfig", kubeconfig, "--node-name", node, "--cloud", cloud,
			"--metadata-endpoint", endpoints[cloud], "--check"}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	before, err := env.Client.CoreV1().Nodes().Get(ctx, "spot-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range clouds {
		t.Run(c.cloud+" passes", func(t *testing.T) {
			code, out, errOut := check(env.Kubeconfig, "spot-1", c.cloud)
			for _, want := range []string{"node spot-1 found", "metadata service: ok: " + c.cloud + " at " + endpoints[c.cloud],
				"node update: ok: the apiserver allows a notice's update of node spot-1", "check passed"} {
				if code != 0 || !strings.Contains(out, want) {
					t.Errorf("exit %d, want 0 and %q in\n%s%s", code, want, out, errOut)
				}
			}
		})
		t.Run(c.cloud+" refusing every read", func(t *testing.T) {
			c.emu.RefuseReads(true)
			defer c.emu.RefuseReads(false)
			code, out, errOut := check(env.Kubeconfig, "spot-1", c.cloud)
			if code != 1 || !strings.Contains(errOut, "check failed: metadata service (see above)") {
				t.Errorf("exit %d, stderr %q; want 1 naming the metadata service", code, errOut)
			}
			for _, p := range c.unreachable {
				if want := "reading " + endpoints[c.cloud] + p + ": "; !strings.Contains(out, "metadata service: FAILED: ") || !strings.Contains(out, want) {
					t.Errorf("the failure does not name %s (%q):\n%s", p, want, out)
				}
			}
			if !strings.Contains(out, "node update: ok") {
				t.Errorf("the node update was not checked as well:\n%s", out)
			}
		})
	}

	// The dry runs changed nothing.
	after, err := env.Client.CoreV1().Nodes().Get(ctx, "spot-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || len(after.Spec.Taints) != len(before.Spec.Taints) || after.Spec.Unschedulable {
		t.Errorf("the node changed: resourceVersion %s -> %s, taints %v, unschedulable %v",
			before.ResourceVersion, after.ResourceVersion, after.Spec.Taints, after.Spec.Unschedulable)
	}

	t.Run("RBAC refuses the node update", func(t *testing.T) {
		kubeconfig := tokenWithNodeVerbs(ctx, t, env, "check-get-only", "get")
		code, out, errOut := check(kubeconfig, "spot-1", "aws")
		want := `node update: FAILED: updating node spot-1 (server-side dry run: taints spotter.dev/interruption and spotter.dev/draining, cordon, annotations spotter.dev/interruption and spotter.dev/draining): ` +
			`nodes "spot-1" is forbidden: User "system:serviceaccount:default:check-get-only" cannot update resource "nodes"`
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(errOut, "check failed: node update (see above)") {
			t.Errorf("exit %d, want 1 and\n%s\nin\n%s%s", code, want, out, errOut)
		}
		if !strings.Contains(out, "metadata service: ok") {
			t.Errorf("the metadata service was not checked as well:\n%s", out)
		}
	})
	t.Run("RBAC allows the node update", func(t *testing.T) {
		kubeconfig := tokenWithNodeVerbs(ctx, t, env, "check-get-update", "get", "update")
		if code, out, errOut := check(kubeconfig, "spot-1", "aws"); code != 0 || !strings.Contains(out, "check passed") {
			t.Errorf("exit %d, want 0:\n%s%s", code, out, errOut)
		}
	})
	t.Run("missing node", func(t *testing.T) {
		code, _, errOut := check(env.Kubeconfig, "missing", "aws")
		if code != 1 || !strings.Contains(errOut, `reading node missing: nodes "missing" not found`) {
			t.Errorf("exit %d, %q", code, errOut)
		}
	})
}

// tokenWithNodeVerbs makes the ServiceAccount default/name, allowed verbs on
// nodes and nothing else, and returns a kubeconfig with its token. It waits
// until the apiserver's authorizer has the binding, so that a refusal is
// RBAC's answer, not its cache's delay.
func tokenWithNodeVerbs(ctx context.Context, t *testing.T, env *testenv.Env, name string, verbs ...string) string {
	t.Helper()
	token := env.ServiceAccountToken(name, false)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: verbs}},
	}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:default:" + name
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s allowed to %v nodes", user, verbs), func(ctx context.Context) (bool, string, error) {
		for _, verb := range verbs {
			review, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
				ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Resource: "nodes", Name: "spot-1"},
			}}, metav1.CreateOptions{})
			if err != nil || !review.Status.Allowed {
				return false, verb + " not allowed yet", err
			}
		}
		return true, "", nil
	})
	return env.TokenKubeconfig(name, token)
}
