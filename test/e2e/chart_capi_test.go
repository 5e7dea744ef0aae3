package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The migrator on Cluster API node groups in the cluster itself, under the
// chart's controller identity with config.cloud.clusterAPI.namespace set: the
// chart grants Cluster API access by a Role in that namespace only (no
// cluster-wide rule), and the migrator replaces the on-demand Machine by a
// spot one, refused nothing.
func TestChartClusterAPIIdentity(t *testing.T) {
	const ns, clusterName = "capi-chart", "lab"
	env := testenv.StartLab(t)
	testenv.StartClusterAPI(t, env)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 8*time.Minute)
	env.CreateNodes(systemNode)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createCAPIGroups(ctx, t, dyn, ns, clusterName, 1, 2)
	capiMachines(t, env, dyn, ns, "od", 1)
	d := tu.Deployment("web", 1, tu.CPU("3"), tu.GracePeriod(1))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 1, time.Minute)

	values := filepath.Join(t.TempDir(), "capi.yaml")
	if err := os.WriteFile(values, fmt.Appendf(nil, `config:
  cloud:
    provider: clusterapi
    clusterAPI:
      clusterName: %s
      namespace: %s
  pricing:
    instanceTypes:
      m5.xlarge: {onDemand: 0.192, spot: 0.07}
  migrator:
    enabled: true
    schedule: "@every 5s"
    nodeReadyTimeout: 90s
  rescheduler:
    enabled: false
agent:
  enabled: false
rbac:
  clusterAPIInfrastructureGroups: [infrastructure.cluster.x-k8s.io, %s]
`, clusterName, ns, capiinfra.Group), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runHelm(t, env, "install", chartRelease, chartDir, "--namespace", chartNS, "--create-namespace",
		"--values", "testdata/chart/lab.yaml", "--values", values); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	// Cluster API access only in the node groups' namespace.
	if _, err := env.Client.RbacV1().Roles(ns).Get(ctx, chartRelease+"-cluster-api", metav1.GetOptions{}); err != nil {
		t.Errorf("the Role of Cluster API in %s: %v", ns, err)
	}
	role, err := env.Client.RbacV1().ClusterRoles().Get(ctx, chartRelease+"-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			if strings.HasSuffix(g, "cluster.x-k8s.io") {
				t.Errorf("the controller's ClusterRole grants %v on %v of %s cluster-wide", r.Verbs, r.Resources, g)
			}
		}
	}

	controller, _, _ := startChartController(ctx, t, env)
	testenv.Eventually(t, 5*time.Minute, "the on-demand Machine gone, a spot Machine, web Running on spot", func(ctx context.Context) (bool, string, error) {
		od, err := machinesOf(ctx, dyn, ns, "od")
		if err != nil {
			return false, "", err
		}
		spot, err := machinesOf(ctx, dyn, ns, "spot")
		if err != nil {
			return false, "", err
		}
		where := podsByNode(ctx, t, env)
		onSpot := false
		for _, m := range spot {
			onSpot = onSpot || m.node != "" && strings.Contains(where, "@"+m.node)
		}
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: lab.CapacityTypeLabel + "=spot"})
		if err != nil {
			return false, "", err
		}
		return len(od) == 0 && len(spot) == 1 && onSpot && len(nodes.Items) == 1,
			fmt.Sprintf("od Machines %v, spot Machines %v, pods %s", od, spot, where), nil
	})
	assertNotRefused(t, controller)
}
