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
	bin := capiBinaries(t)
	files, err := filepath.Glob(filepath.Join(bin, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Cluster API CRDs in %s/crds: run hack/capi-bin.sh", bin)
	}
	crds := capiinfra.CRDs()
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
		t.Fatalf("installing the Cluster API CRDs: %v", err)
	}
}
