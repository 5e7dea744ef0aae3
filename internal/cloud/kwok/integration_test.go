package kwok_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/kwok"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// TestAgainstAPIServer runs the provider against a real kube-apiserver: the
// Nodes it creates and deletes are real objects, validated by the server.
// Subtests share the server and use groups of their own.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.StartAPIServer(t)

	newProvider := func(t *testing.T, groups ...kwok.NodeGroupConfig) (*kwok.Provider, *clocktesting.FakeClock) {
		t.Helper()
		clk := clocktesting.NewFakeClock(epoch)
		p, err := kwok.New(env.Client, clk, kwok.Config{NodeGroups: groups})
		if err != nil {
			t.Fatal(err)
		}
		return p, clk
	}

	t.Run("IncreaseSize creates Nodes after the delay; DeleteNodes deletes them and lowers the target", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		p, clk := newProvider(t, kwok.NodeGroupConfig{
			ID: "it-spot", Spot: true, MinSize: 1, MaxSize: 4, InstanceType: "m5.xlarge", Zone: "zone-b",
			PricePerHour: ptr.To(0.07), ProvisioningDelay: metav1.Duration{Duration: time.Minute},
		})
		g := p.NodeGroup("it-spot")
		reconcile(t, p) // the group starts at its minimum size, without delay
		if err := g.IncreaseSize(ctx, 2); err != nil {
			t.Fatal(err)
		}
		clk.Step(59 * time.Second)
		reconcile(t, p)
		if n := groupNodes(t, env.Client, "it-spot"); len(n) != 1 {
			t.Fatalf("%d nodes before the delay, want the initial 1", len(n))
		}
		clk.Step(time.Second)
		reconcile(t, p)
		nodes := groupNodes(t, env.Client, "it-spot")
		if len(nodes) != 3 {
			t.Fatalf("%d nodes after the delay, want 3", len(nodes))
		}
		n := &nodes[0]
		if n.Labels[lab.CapacityTypeLabel] != "spot" || n.Annotations[lab.KwokNodeAnnotation] != "fake" ||
			n.Spec.ProviderID != "kwok://it-spot/"+n.Name || n.Status.Allocatable.Cpu().IsZero() {
			t.Errorf("node %s: labels %v, annotations %v, providerID %q, allocatable %v",
				n.Name, n.Labels, n.Annotations, n.Spec.ProviderID, n.Status.Allocatable)
		}

		insts, err := p.Instances(ctx, []*corev1.Node{n})
		if err != nil {
			t.Fatal(err)
		}
		if i := insts[n.Name]; !i.Spot || i.InstanceType != "m5.xlarge" || i.Zone != "zone-b" || !i.PriceKnown || i.NodeGroup != "it-spot" {
			t.Errorf("instance %+v", i)
		}

		if err := g.DeleteNodes(ctx, []*corev1.Node{&nodes[0], &nodes[1]}); err != nil {
			t.Fatal(err)
		}
		if got := target(t, g); got != 1 {
			t.Errorf("target %d after deleting 2 of 3", got)
		}
		if err := p.DeleteInstance(ctx, &nodes[2]); !errors.Is(err, cloud.ErrBelowMinSize) {
			t.Errorf("deleting the last node of a group with min 1: %v", err)
		}
		clk.Step(time.Hour)
		reconcile(t, p)
		if left := groupNodes(t, env.Client, "it-spot"); len(left) != 1 || left[0].Name != nodes[2].Name {
			t.Errorf("left %d nodes, want %s only", len(left), nodes[2].Name)
		}
	})

	t.Run("capacity limit leaves the request unfulfilled and reported; DecreaseTargetSize cancels it", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		p, clk := newProvider(t, kwok.NodeGroupConfig{
			ID: "it-scarce", Spot: true, MaxSize: 4, CapacityLimit: ptr.To(1),
			ProvisioningDelay: metav1.Duration{Duration: 30 * time.Second},
		})
		g := p.NodeGroup("it-scarce")
		if err := g.IncreaseSize(ctx, 2); err != nil {
			t.Fatal(err)
		}
		clk.Step(30 * time.Second)
		reconcile(t, p)
		if n := groupNodes(t, env.Client, "it-scarce"); len(n) != 1 {
			t.Fatalf("%d nodes with capacity 1", len(n))
		}
		insts, err := g.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(insts) != 2 || insts[1].State != cloud.InstanceCreating || !cloud.IsCapacityUnavailable(insts[1].Err) {
			t.Fatalf("Nodes = %+v, want a running node and a capacity-unavailable request", insts)
		}
		if err := g.DecreaseTargetSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := target(t, g); got != 1 {
			t.Errorf("target %d after cancelling", got)
		}
		if n := groupNodes(t, env.Client, "it-scarce"); len(n) != 1 {
			t.Errorf("cancelling changed the nodes: %d", len(n))
		}
	})

	t.Run("TemplateNode of a size-0 group is a valid Node", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		p, _ := newProvider(t, kwok.NodeGroupConfig{ID: "it-empty", Spot: true, MaxSize: 2, CPU: "16", Memory: "64Gi"})
		tmpl, err := p.NodeGroup("it-empty").TemplateNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Status.Allocatable.Cpu().Value() != 16 || tmpl.Labels[lab.CapacityTypeLabel] != "spot" {
			t.Errorf("template %+v", tmpl)
		}
		// The server accepts it as it is, which proves it is a well-formed Node.
		tmpl.Labels[kwok.NodeGroupLabel] = "template-check" // not the group's: the group must not count it
		created, err := env.Client.CoreV1().Nodes().Create(ctx, tmpl, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the server refused the template: %v", err)
		}
		_ = env.Client.CoreV1().Nodes().Delete(ctx, created.Name, metav1.DeleteOptions{})
	})

	t.Run("trace replay changes capacity over fake time", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		p, clk := newProvider(t, kwok.NodeGroupConfig{
			ID: "it-trace", Spot: true, MaxSize: 4, Preempt: true,
			Trace: &kwok.TraceConfig{Path: availabilityTrace, Nodes: 16},
		})
		g := p.NodeGroup("it-trace")
		if err := g.IncreaseSize(ctx, 4); err != nil {
			t.Fatal(err)
		}
		// Ticks of 5 min: 0 at tick 0, 5/16 at 7, 16/16 at 8, 8/16 at 15, 0 at 17.
		for _, tc := range []struct {
			tick  int
			nodes int
		}{{0, 0}, {7, 1}, {8, 4}, {15, 2}, {17, 0}, {24, 4}} {
			clk.SetTime(epoch.Add(time.Duration(tc.tick) * 5 * time.Minute))
			reconcile(t, p)
			if n := groupNodes(t, env.Client, "it-trace"); len(n) != tc.nodes {
				t.Errorf("tick %d: %d nodes, want %d", tc.tick, len(n), tc.nodes)
			}
		}
	})

	t.Run("Start adopts existing Nodes and replaces one deleted behind its back", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{{ID: "it-adopt", MaxSize: 3, InitialSize: 2}}}
		clk := clocktesting.NewFakeClock(epoch)
		first, err := kwok.New(env.Client, clk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		reconcile(t, first)
		before := groupNodes(t, env.Client, "it-adopt")

		p, err := kwok.New(env.Client, clk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Start(runCtx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Start returned %v", err)
			}
		})
		select {
		case <-p.Synced():
		case <-ctx.Done():
			t.Fatal("Start did not sync")
		}
		if got := target(t, p.NodeGroup("it-adopt")); got != 2 {
			t.Errorf("target after adoption %d, want 2", got)
		}
		if err := env.Client.CoreV1().Nodes().Delete(ctx, before[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "a replacement node", func(ctx context.Context) (bool, string, error) {
			if err := p.Reconcile(ctx); err != nil {
				return false, "", err
			}
			nodes := groupNodes(t, env.Client, "it-adopt")
			names := []string{}
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			replaced := len(nodes) == 2 && names[0] != before[0].Name && names[1] != before[0].Name
			return replaced, "nodes " + strings.Join(names, ", "), nil
		})
	})

	t.Run("control plane on spot is refused", func(t *testing.T) {
		_, err := kwok.New(env.Client, clocktesting.NewFakeClock(epoch), kwok.Config{NodeGroups: []kwok.NodeGroupConfig{
			{ID: "it-cp", Spot: true, MaxSize: 1, Labels: map[string]string{lab.ControlPlaneRole: ""}},
		}})
		if !cloud.IsControlPlane(err) {
			t.Errorf("New = %v", err)
		}
	})
}
