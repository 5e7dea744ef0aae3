// Package e2e holds tests against the full lab: real etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager, with kwok nodes.
package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/internal/testutil"
)

// The real scheduler places a Deployment's pods on kwok nodes, and an evicted
// pod is recreated by its ReplicaSet and placed again.
func TestDeploymentScheduledAndEvictedPodReplaced(t *testing.T) {
	env := testenv.StartLab(t)
	env.CreateNodes(
		lab.NodeSpec{Name: "spot-a", Class: lab.ClassSpot, Zone: "zone-a"},
		lab.NodeSpec{Name: "spot-b", Class: lab.ClassSpot, Zone: "zone-b"},
		lab.NodeSpec{Name: "cp", Class: lab.ClassControlPlane},
	)
	ctx := testenv.Context(t, 3*time.Minute)

	dep := testutil.Deployment("web", 3, testutil.CPU("500m"), testutil.Memory("256Mi"), testutil.GracePeriod(1))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	for _, p := range pods {
		if p.Spec.NodeName == "cp" {
			t.Errorf("pod %s placed on the tainted control-plane node", p.Name)
		}
		assertScheduledBy(ctx, t, env, p, "default-scheduler")
	}

	// Evict one pod: the ReplicaSet makes a new one and the scheduler places it.
	victim := pods[0]
	err := env.Client.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: victim.Namespace},
	})
	if err != nil {
		t.Fatalf("evicting %s: %v", victim.Name, err)
	}
	testenv.Eventually(t, time.Minute, "the evicted pod to be replaced by a Running pod", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		running, victimGone := 0, true
		for _, p := range list.Items {
			if p.UID == victim.UID {
				victimGone = false
				continue
			}
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
		}
		return victimGone && running == 3, fmt.Sprintf("victim gone=%v, running replacements and survivors=%d", victimGone, running), nil
	})
}

// assertScheduledBy checks that pod p's Scheduled event was reported by the
// named scheduler: the real kube-scheduler, not a test shortcut, bound it.
func assertScheduledBy(ctx context.Context, t *testing.T, env *testenv.Env, p corev1.Pod, component string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "a Scheduled event for pod "+p.Name, func(ctx context.Context) (bool, string, error) {
		events, err := env.Client.EventsV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"regarding.name": p.Name, "reason": "Scheduled"}.String(),
		})
		if err != nil {
			return false, "", err
		}
		var reporters []string
		for _, e := range events.Items {
			if e.ReportingController == component {
				return true, "", nil
			}
			reporters = append(reporters, e.ReportingController)
		}
		return false, fmt.Sprintf("Scheduled events reported by %v", reporters), nil
	})
}
