package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spotter.dev/spotter/internal/lab/capiinfra"
)

// InstallClusterAPICRDs installs Cluster API's CRDs (those hack/capi-bin.sh
// caches: the core's and KubeadmControlPlane) and the lab provider's into
// env's apiserver, and waits until they are served. It starts no controller:
// for tests and benchmarks that write the objects, status included, as Cluster
// API would.
func InstallClusterAPICRDs(t testing.TB, env *Env) {
	t.Helper()
	installCRDs(t, env, "crds", capiinfra.CRDs()...)
}

// InstallClusterAPIV1Beta1CRDs installs the CRDs of the last Cluster API
// release that serves cluster.x-k8s.io/v1beta1 alone (hack/capi-bin.sh's
// crds-v1beta1: the core's and KubeadmControlPlane), as an older
// management cluster has them, and the lab provider's; no controller.
func InstallClusterAPIV1Beta1CRDs(t testing.TB, env *Env) {
	t.Helper()
	installCRDs(t, env, "crds-v1beta1", capiinfra.CRDs()...)
}

// installCRDs installs the CRDs of the cache's directory dir, and crds.
func installCRDs(t testing.TB, env *Env, dir string, crds ...[]byte) {
	t.Helper()
	bin := capiBinaries(t)
	files, err := filepath.Glob(filepath.Join(bin, dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Cluster API CRDs in %s/%s: run hack/capi-bin.sh", bin, dir)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := capiinfra.InstallCRDs(ctx, env.Config, crds...); err != nil {
		t.Fatalf("installing the Cluster API CRDs of %s: %v", dir, err)
	}
}
