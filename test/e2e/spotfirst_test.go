package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// spot-first, installed by the chart (its MutatingAdmissionPolicy gates the new
// pods of the selected namespaces) and run by the real controller under the
// chart's identity, with the real scheduler: a new replica of a running
// workload waits for spot while an on-demand node has room, goes to spot as
// soon as a spot node comes, and falls back to on-demand after fallbackAfter;
// the pods of a workload with no Ready pod, a pod that cannot run on spot, a
// pod whose spread constraint the spot label would narrow, and the pods of a
// namespace the policy does not select are never held. The pods carry what
// the controller's cache leaves out (an environment, a command, a volume
// mount): the controller's updates start from the pod as the apiserver has
// it, which may not lose them.
func TestChartSpotFirst(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 8*time.Minute)
	env.CreateNodes(systemNode,
		lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, CPU: "8"},
		lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "2"},
	)
	installChart(t, env, "config.spotFirst.enabled=true", "config.spotFirst.fallbackAfter=1m",
		"config.rescheduler.enabled=false", "agent.enabled=false")
	controller, _, controllerKC := startChartController(ctx, t, env)
	for name, selected := range map[string]bool{"shop": true, "other": false} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if selected {
			ns.Labels = map[string]string{"spotter.dev/spot-first": "enabled"}
		}
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The apiserver loads a new admission policy asynchronously: wait until
	// a pod of a ReplicaSet created in "shop" (dry run) comes back gated.
	testenv.Eventually(t, time.Minute, "the spot-first policy in effect", func(ctx context.Context) (bool, string, error) {
		probe := tu.Pod("probe", tu.InNamespace("shop"), tu.OwnedBy("ReplicaSet", "probe"))
		got, err := env.Client.CoreV1().Pods("shop").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, "", err
		}
		return spotfirst.Gated(got), fmt.Sprintf("gates %v", got.Spec.SchedulingGates), nil
	})
	deploy := func(ns, name string, replicas int32, opts ...tu.PodOption) *appsv1.Deployment {
		t.Helper()
		d := tu.Deployment(name, replicas, append([]tu.PodOption{tu.InNamespace(ns), tu.CPU("900m"), tu.GracePeriod(1)}, opts...)...)
		d.Namespace = ns
		// What the controller's cache leaves out of a pod (an environment,
		// a command, a volume mount): its update must keep them.
		for i := range d.Spec.Template.Spec.Containers {
			c := &d.Spec.Template.Spec.Containers[i]
			c.Env = []corev1.EnvVar{{Name: "MODE", Value: "serve"}}
			c.Command = []string{"/app", "--serve"}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		}
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "scratch",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
		out, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// where lists the namespace's pods: name@node, "gated" or "steered".
	where := func(ctx context.Context, ns, app string) (map[string]int, string, error) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return nil, "", err
		}
		count := map[string]int{}
		var out []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			at := p.Spec.NodeName
			switch {
			case spotfirst.Gated(&p):
				at = "gated"
			case at == "" && p.Spec.NodeSelector[lab.CapacityTypeLabel] == "spot" && p.Annotations[spotfirst.SteeredAnnotation] != "":
				at = "steered"
			case at == "":
				at = "pending"
			}
			count[at]++
			out = append(out, p.Name+"@"+at)
		}
		return count, strings.Join(out, " "), nil
	}
	want := func(timeout time.Duration, ns, app string, wantAt map[string]int) {
		t.Helper()
		testenv.Eventually(t, timeout, fmt.Sprintf("%s/%s pods at %v", ns, app, wantAt), func(ctx context.Context) (bool, string, error) {
			got, s, err := where(ctx, ns, app)
			if err != nil {
				return false, "", err
			}
			return fmt.Sprint(got) == fmt.Sprint(wantAt), s, nil
		})
	}

	scaleTo := func(ns, name string, replicas int32) {
		t.Helper()
		// The deployment controller writes the object's status meanwhile:
		// a conflict is read again and retried.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := env.Client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = replicas
			_, err = env.Client.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Two replicas: a workload with no Ready pod needs its pods now, so they
	// are released, and go where the scheduler puts them: od-1 is cordoned
	// meanwhile so that they fill spot-1.
	cordon := func(on bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, "od-1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	deploy("shop", "web", 2)
	want(time.Minute, "shop", "web", map[string]int{"spot-1": 2})
	env.WaitForPodsRunning("shop", "app=web", 2, time.Minute)
	cordon(false)
	// A third, with no room left on spot: it waits for spot although od-1
	// has room.
	scaleTo("shop", "web", 3)
	want(time.Minute, "shop", "web", map[string]int{"spot-1": 2, "steered": 1})
	// Held, not slow: the scheduler has tried the pod, od-1's room in view,
	// and found no node for it; it still waits.
	testenv.Eventually(t, time.Minute, "the scheduler to find no node for the steered pod", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if p.Spec.NodeName == "" && c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, "", nil
				}
			}
		}
		return false, "no pod marked unschedulable", nil
	})
	want(time.Second, "shop", "web", map[string]int{"spot-1": 2, "steered": 1})
	// Spot capacity comes: the pod goes there.
	env.CreateNodes(lab.NodeSpec{Name: "spot-2", Class: lab.ClassSpot, CPU: "2"})
	want(time.Minute, "shop", "web", map[string]int{"spot-1": 2, "spot-2": 1})

	// A pod that cannot run on spot is released at once.
	deploy("shop", "db", 1, tu.RequireNodeLabel(lab.CapacityTypeLabel, "on-demand"))
	want(time.Minute, "shop", "db", map[string]int{"od-1": 1})
	// A namespace the policy does not select: never gated, the pod takes
	// on-demand room when spot has none.
	deploy("other", "batch", 1, tu.CPU("1500m"))
	want(time.Minute, "other", "batch", map[string]int{"od-1": 1})

	// Two more web replicas: one fits on spot-2, the other waits. Its
	// workload keeps what its PodDisruptionBudget demands without it (3), so
	// it is steered; after fallbackAfter (1m) it is deleted, and its
	// replacement runs on od-1.
	env.WaitForPodsRunning("shop", "app=web", 3, time.Minute)
	pdb := tu.PDB("web", "web", tu.MinAvailable(3))
	pdb.Namespace = "shop"
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the budget's status", func(ctx context.Context) (bool, string, error) {
		b, err := env.Client.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return b.Status.CurrentHealthy == 3 && b.Status.DesiredHealthy == 3, fmt.Sprintf("%+v", b.Status), nil
	})
	scaleTo("shop", "web", 5)
	want(time.Minute, "shop", "web", map[string]int{"spot-1": 2, "spot-2": 2, "steered": 1})
	want(2*time.Minute, "shop", "web", map[string]int{"spot-1": 2, "spot-2": 2, "od-1": 1})
	// Spot is full. A workload with no Ready pod needs its pod now: released
	// at once, it takes on-demand room.
	deploy("shop", "solo", 1)
	want(30*time.Second, "shop", "solo", map[string]int{"od-1": 1})
	// A workload with a DoNotSchedule spread constraint: the spot label would
	// narrow the constraint's domains to the spot nodes, so its extra replica
	// is released, not steered, and takes on-demand room while spot is full.
	deploy("shop", "spread", 1, tu.CPU("500m"), tu.Spread("spread", corev1.LabelHostname, 10))
	want(30*time.Second, "shop", "spread", map[string]int{"od-1": 1})
	env.WaitForPodsRunning("shop", "app=spread", 1, time.Minute)
	scaleTo("shop", "spread", 2)
	want(30*time.Second, "shop", "spread", map[string]int{"od-1": 2})
	waitEventReason(t, env, spotfirst.ReasonFallback)
	assertNotRefused(t, controller)

	// Under the chart's identity the controller may do what spot-first does
	// and no more (RBAC lets it update and delete any pod). It is stopped
	// first, so that it admits none of the pods below itself.
	controller.Stop()
	ctl := kubeClient(t, controllerKC)
	gated := tu.Pod("gated", tu.InNamespace("other"), tu.CPU("100m"), tu.WithLabels("app", "gated"))
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: spotfirst.GateName}}
	gated, err := env.Client.CoreV1().Pods("other").Create(ctx, gated, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(pod *corev1.Pod, change func(*corev1.Pod)) error {
		p := pod.DeepCopy()
		change(p)
		_, err := ctl.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		return err
	}
	wantRefused(t, "change a gated pod's image", update(gated, func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = "example.com/other:latest"
		p.Spec.SchedulingGates = nil
	}), "may change only the scheduling gates and the node selector of pod other/gated")
	wantRefused(t, "label a gated pod", update(gated, func(p *corev1.Pod) { p.Labels["e2e"] = "x" }), "may add only its annotation")
	solos, err := env.Client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{LabelSelector: "app=solo"})
	if err != nil || len(solos.Items) != 1 {
		t.Fatalf("the solo pod: %d (%v)", len(solos.Items), err)
	}
	solo := &solos.Items[0]
	wantRefused(t, "update a pod without the gate", update(solo, func(p *corev1.Pod) {
		p.Annotations = map[string]string{spotfirst.SteeredAnnotation: "2026-01-01T00:00:00Z"}
	}), "may update only pods gated by spotter.dev/spot-first, not shop/"+solo.Name)
	wantRefused(t, "delete a bound pod", ctl.CoreV1().Pods("shop").Delete(ctx, solo.Name, metav1.DeleteOptions{}),
		"may delete only unbound pods it steered")
	// What spot-first does passes: steering the gated pod.
	if err := update(gated, func(p *corev1.Pod) {
		*p = *spotfirst.Steer(p, lab.CapacityTypeLabel, "spot", "2026-01-01T00:00:00Z")
	}); err != nil {
		t.Errorf("steering a gated pod under the controller's identity: %v", err)
	}
}
