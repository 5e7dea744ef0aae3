package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"spotter.dev/spotter/internal/cloud/clusterapi"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/kubeclient"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// The Cluster API provider and one migrator run over 500 Machines, in a real
// apiserver with Cluster API's CRDs:
//
//	go test ./test/bench -run '^$' -bench ClusterAPI -benchtime 5x -timeout 30m -v
//
// 10 on-demand MachineDeployments of 30 Machines and 4 spot ones of 50, each
// with its MachineSet, every Machine with its Node (matched by the
// cluster.x-k8s.io/machine annotation) and status.nodeRef; one pod on each
// on-demand node. Cluster API's controllers do not run: the objects are
// written as they would leave them (MachineSets owned by their
// MachineDeployments, Machines by their MachineSets, status.nodeRef set), and
// the provider reads nothing else. The requests each operation sends are
// counted by verb and resource.
func BenchmarkClusterAPI500Machines(b *testing.B) {
	const ns, clusterName = "bench", "lab"
	env := testenv.StartAPIServer(b)
	testenv.InstallClusterAPICRDs(b, env)
	ctx := testenv.Context(b, 30*time.Minute)
	start := time.Now()
	odNodes, nodes := build500(ctx, b, env, ns, clusterName)
	b.Logf("500 Machines, their MachineSets, MachineDeployments, Nodes and %d pods written in %s", len(odNodes), time.Since(start).Round(time.Second))

	counts := &requestCounts{}
	counted := rest.CopyConfig(env.Config)
	counted.QPS, counted.Burst = 1000, 2000 // the benchmark measures Spotter, not client-side throttling
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counter{next: rt, counts: counts} })
	kube := kubernetes.NewForConfigOrDie(counted)
	pricing := v1alpha1.PricingConfig{InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}

	b.Run("provider refresh and lookup of every node", func(b *testing.B) {
		// A fake clock past the TTL before each operation: every one reads the
		// Cluster API objects afresh, as the first call after 5 s does.
		clk := testingclock.NewFakeClock(time.Now())
		p, err := clusterapi.New(counted, kube, clk, clusterapi.Options{ClusterName: clusterName, Namespace: ns, Pricing: pricing})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.NodeGroups(ctx); err != nil { // discovery, once per process
			b.Fatal(err)
		}
		counts.reset()
		b.ResetTimer()
		for range b.N {
			clk.Step(10 * time.Second)
			insts, err := p.Instances(ctx, nodes)
			if err != nil || len(insts) != len(nodes) {
				b.Fatalf("%d instances of %d nodes, %v", len(insts), len(nodes), err)
			}
			groups, err := p.NodeGroups(ctx)
			if err != nil || len(groups) != 14 {
				b.Fatalf("%d groups, %v", len(groups), err)
			}
			for _, n := range nodes {
				if _, err := p.NodeGroupForNode(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		counts.report(b, "op")
	})

	b.Run("migrator run, dry run, every on-demand node a candidate", func(b *testing.B) {
		// The manager's cache in production: informers, read without a request.
		scheme := clientgoscheme.Scheme
		reader, err := cache.New(env.Config, cache.Options{Scheme: scheme})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = reader.Start(ctx) }()
		// The first read starts the informers (once the cache runs) and waits
		// for their sync.
		testenv.Eventually(b, time.Minute, "the cache started and synced", func(ctx context.Context) (bool, string, error) {
			_, err := snapshot.FromReader(ctx, reader)
			return err == nil, fmt.Sprint(err), nil
		})
		p, err := clusterapi.New(counted, kube, clock.RealClock{}, clusterapi.Options{ClusterName: clusterName, Namespace: ns, Pricing: pricing})
		if err != nil {
			b.Fatal(err)
		}
		budget, err := disruption.New(v1alpha1.DisruptionConfig{})
		if err != nil {
			b.Fatal(err)
		}
		// Dry run: each candidate is looked up and planned against the spot
		// groups, and none is drained (without Cluster API's controllers no
		// Machine would come). Its Events are dropped here; in a cluster each
		// is one create (or a series patch).
		m := migrator.New(reader, kube, cloudmetrics.Decorate(p), plan.New(plan.Options{Pricing: pricing}), nil, budget,
			clock.RealClock{}, &events.FakeRecorder{}, migrator.Options{Mode: v1alpha1.MigrationMakeBeforeBreak, DryRun: true, MaxNodesPerRun: 10})
		if _, err := p.NodeGroups(ctx); err != nil { // discovery, once per process
			b.Fatal(err)
		}
		counts.reset()
		b.ResetTimer()
		for range b.N {
			if _, err := m.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		counts.report(b, "run")
	})
}

// build500 writes the Cluster API objects, Nodes and pods; it returns the
// on-demand Nodes and all Nodes.
func build500(ctx context.Context, b *testing.B, env *testenv.Env, ns, clusterName string) (onDemand, all []*corev1.Node) {
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = 2000, 4000
	dyn := dynamic.NewForConfigOrDie(fast)
	kube := kubernetes.NewForConfigOrDie(fast)
	for _, n := range []string{ns} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	create := func(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
		out, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		return out
	}
	create(capiinfra.LabMachineTemplatesGVR, capiinfra.NewMachineTemplate(ns, "od", capiinfra.MachineSpec{InstanceType: "m5.xlarge", CPU: "4", Memory: "16Gi"}))
	create(capiinfra.LabMachineTemplatesGVR, capiinfra.NewMachineTemplate(ns, "spot", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.xlarge", CPU: "4", Memory: "16Gi"}))
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "app"}}}}}}
	rs, err := kube.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}

	type work struct {
		machine *unstructured.Unstructured
		node    *corev1.Node
		pod     *corev1.Pod
	}
	var jobs []work
	for _, g := range []struct {
		prefix, template string
		count, size, max int
		spot             bool
	}{{"od", "od", 10, 30, 30, false}, {"spot", "spot", 4, 50, 60, true}} {
		for gi := range g.count {
			name := fmt.Sprintf("%s-%d", g.prefix, gi)
			md := capiinfra.NewMachineDeployment(ns, name, clusterName, g.template, int32(g.size))
			md.SetAnnotations(map[string]string{clusterapi.MinSizeAnnotation: "0", clusterapi.MaxSizeAnnotation: fmt.Sprint(g.max),
				clusterapi.CapacityCPUAnnotation: "4", clusterapi.CapacityMemoryAnnotation: "16Gi"})
			md = create(capiinfra.MachineDeploymentsGVR, md)
			ms := md.DeepCopy()
			ms.SetKind("MachineSet")
			ms.SetName(name + "-ms")
			ms.SetResourceVersion("")
			ms.SetUID("")
			ms.SetAnnotations(nil)
			ms.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capiinfra.CAPIGroupVersion.String(), Kind: "MachineDeployment",
				Name: md.GetName(), UID: md.GetUID(), Controller: ptr.To(true)}})
			spec, _, _ := unstructured.NestedMap(md.Object, "spec")
			delete(spec, "rollout")
			ms.Object["spec"] = spec
			delete(ms.Object, "status")
			ms = create(capiinfra.MachineSetsGVR, ms)
			tmpl, _, _ := unstructured.NestedMap(md.Object, "spec", "template")
			for i := range g.size {
				mname := fmt.Sprintf("%s-m-%02d", name, i)
				providerID := capiinfra.ProviderIDPrefix + ns + "/" + mname
				m := &unstructured.Unstructured{Object: map[string]any{}}
				m.SetGroupVersionKind(capiinfra.MachineGVK)
				m.SetNamespace(ns)
				m.SetName(mname)
				labels, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "labels")
				m.SetLabels(labels)
				m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capiinfra.CAPIGroupVersion.String(), Kind: "MachineSet",
					Name: ms.GetName(), UID: ms.GetUID(), Controller: ptr.To(true)}})
				mspec, _, _ := unstructured.NestedMap(tmpl, "spec")
				mspec = runtimeDeepCopy(mspec)
				mspec["providerID"] = providerID
				_ = unstructured.SetNestedField(mspec, "LabMachine", "infrastructureRef", "kind")
				_ = unstructured.SetNestedField(mspec, mname, "infrastructureRef", "name")
				m.Object["spec"] = mspec
				class := lab.ClassOnDemand
				if g.spot {
					class = lab.ClassSpot
				}
				node := lab.Node(lab.NodeSpec{Name: mname, Class: class, ProviderID: providerID, CPU: "4", Memory: "16Gi", InstanceType: "m5.xlarge"})
				node.Annotations[clusterapi.MachineAnnotation] = mname
				node.Annotations[clusterapi.ClusterNamespaceAnnotation] = ns
				node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
				w := work{machine: m, node: node}
				if !g.spot {
					w.pod = tu.Pod("web-"+mname, tu.OnNode(mname), tu.CPU("500m"), tu.Memory("512Mi"), tu.WithLabels("app", "web"),
						tu.OwnedBy("ReplicaSet", rs.Name))
				}
				jobs = append(jobs, w)
			}
		}
	}

	var mu sync.Mutex
	ch := make(chan work)
	var wg sync.WaitGroup
	var failed error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range ch {
				err := func() error {
					m, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).Create(ctx, w.machine, metav1.CreateOptions{})
					if err != nil {
						return err
					}
					_ = unstructured.SetNestedField(m.Object, w.node.Name, "status", "nodeRef", "name")
					if _, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
						return err
					}
					if _, err := kube.CoreV1().Nodes().Create(ctx, w.node, metav1.CreateOptions{}); err != nil {
						return err
					}
					if w.pod != nil {
						pod, err := kube.CoreV1().Pods("default").Create(ctx, w.pod, metav1.CreateOptions{})
						if err != nil {
							return err
						}
						pod.Status.Phase = corev1.PodRunning
						if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
							return err
						}
					}
					return nil
				}()
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, w := range jobs {
		ch <- w
	}
	close(ch)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		n := &list.Items[i]
		if len(n.Status.Conditions) == 0 {
			b.Fatalf("node %s lost its Ready condition on create", n.Name)
		}
		all = append(all, n)
		if n.Labels[lab.CapacityTypeLabel] == string(lab.ClassOnDemand) {
			onDemand = append(onDemand, n)
		}
	}
	if len(all) != 500 {
		b.Fatalf("%d nodes, want 500", len(all))
	}
	return onDemand, all
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// requestCounts counts requests by verb and resource.
type requestCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = map[string]int{}
}

func (c *requestCounts) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

// report logs the requests per operation and reports their total as a metric.
func (c *requestCounts) report(b *testing.B, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	var lines []string
	for k, v := range c.n {
		total += v
		lines = append(lines, fmt.Sprintf("%s %.1f", k, float64(v)/float64(b.N)))
	}
	sort.Strings(lines)
	b.ReportMetric(float64(total)/float64(b.N), "requests/"+op)
	b.Logf("requests per %s (%d %ss): %s", op, b.N, op, strings.Join(lines, ", "))
}

// counter counts each request as "<verb> <resource>".
type counter struct {
	next   http.RoundTripper
	counts *requestCounts
}

func (c counter) RoundTrip(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	resource := req.URL.Path
	if i := slices.Index(parts, "namespaces"); i >= 0 && i+2 < len(parts) {
		resource = strings.Join(parts[i+2:], "/")
	} else if len(parts) > 0 {
		resource = parts[len(parts)-1]
	}
	// Object names are not resources: keep the resource and the subresource.
	if p := strings.Split(resource, "/"); len(p) >= 2 {
		resource = p[0] + "/" + strings.Join(p[2:], "/")
	}
	c.counts.add(kubeclient.Verb(req) + " " + strings.TrimSuffix(resource, "/"))
	return c.next.RoundTrip(req)
}
