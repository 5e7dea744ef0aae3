package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// Two controller processes: only the leader acts; when it is killed, the other
// takes the lease over and acts.
func TestLeaderElection(t *testing.T) {
	env := testenv.StartLab(t)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})
	config := filepath.Join(t.TempDir(), "spotter.yaml")
	body := `apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
manager:
  leaderElection:
    leaseNamespace: kube-system
    leaseDuration: 4s
    renewDeadline: 3s
    retryPeriod: 500ms
`
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *testenv.Process {
		return testenv.StartSpotter(t, name, "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	}
	procs := map[string]*testenv.Process{"a": start("a")}
	holder := waitHolder(t, env, "")
	procs["b"] = start("b")
	waitLabel(t, env, "spot-1", true)

	// Only the leader logs reconciles; the other waits for the lease: it has
	// asked for it, and four renewals (retryPeriod 500ms) later it has still
	// not acted.
	testenv.Eventually(t, 30*time.Second, "both processes to ask for the lease", func(context.Context) (bool, string, error) {
		asked := 0
		for _, p := range procs {
			data, _ := os.ReadFile(p.Log)
			if strings.Contains(strings.ToLower(string(data)), "attempting to acquire leader lease") {
				asked++
			}
		}
		return asked == 2, fmt.Sprintf("%d of 2", asked), nil
	})
	waitRenewals(t, env, 4)
	var leader, follower string
	for name, p := range procs {
		data, _ := os.ReadFile(p.Log)
		if strings.Contains(strings.ToLower(string(data)), "successfully acquired lease") {
			leader = name
		} else {
			follower = name
		}
	}
	if leader == "" || follower == "" {
		t.Fatalf("want exactly one leader; holder %q", holder)
	}
	if data, _ := os.ReadFile(procs[follower].Log); strings.Contains(string(data), "Updated node") {
		t.Errorf("the follower %s acted without the lease", follower)
	}

	procs[leader].Kill()
	waitHolder(t, env, holder)
	// The new leader acts: a node created now gets its label.
	env.CreateNodes(lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot})
	waitLabel(t, env, "spot-2", true)
	if data, _ := os.ReadFile(procs[follower].Log); !strings.Contains(strings.ToLower(string(data)), "successfully acquired lease") {
		t.Errorf("%s did not take the lease over", follower)
	}
}

// waitRenewals waits until the lease's holder has renewed it n times more.
func waitRenewals(t *testing.T, env *testenv.Env, n int) {
	t.Helper()
	var last time.Time
	renewals := -1 // the first read is not a renewal
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d renewals of the lease", n), func(ctx context.Context) (bool, string, error) {
		l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "spotter", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, "", err
		}
		if at := l.Spec.RenewTime.Time; !at.Equal(last) {
			last = at
			renewals++
		}
		return renewals >= n, fmt.Sprintf("%d renewals", renewals), nil
	})
}

// waitHolder waits until the lease is held by someone other than previous, and
// returns the holder.
func waitHolder(t *testing.T, env *testenv.Env, previous string) string {
	t.Helper()
	var holder string
	testenv.Eventually(t, 45*time.Second, "a lease holder other than "+previous, func(ctx context.Context) (bool, string, error) {
		l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "spotter", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder", nil
		}
		holder = *l.Spec.HolderIdentity
		return holder != "" && holder != previous, fmt.Sprint("holder ", holder), nil
	})
	return holder
}

func waitLabel(t *testing.T, env *testenv.Env, node string, want bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s interruptible=%v", node, want), func(ctx context.Context) (bool, string, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, ok := n.Labels["cluster.x-k8s.io/interruptible"]
		return ok == want, fmt.Sprint(n.Labels), nil
	})
}
