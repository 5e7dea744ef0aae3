package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/internal/gencluster"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Loading changes no plan. A generated cluster, its objects given what
// loading leaves out (managedFields, kubectl's last-applied-configuration,
// node images), is planned from the objects of the reference loader (each
// decoded whole, the way snapshots were always read) and from those of
// LoadWith, as YAML and as JSON: the plans are the same, to every pod's
// destination and every reason, with and without consolidation.
func TestLoadChangesNoPlan(t *testing.T) {
	s := generated(t, 120)
	var items []any
	for i, n := range s.Nodes {
		withBulk(&n.ObjectMeta, n)
		n.Status.Images = []corev1.ContainerImage{{Names: []string{fmt.Sprintf("example/image-%d:1", i)}, SizeBytes: 1 << 20}}
		items = append(items, n)
	}
	for _, p := range s.Pods {
		withBulk(&p.ObjectMeta, p)
		items = append(items, p)
	}
	for _, b := range s.PDBs {
		withBulk(&b.ObjectMeta, b)
		items = append(items, b)
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	asJSON, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	asYAML, err := yaml.JSONToYAML(asJSON)
	if err != nil {
		t.Fatal(err)
	}
	for format, data := range map[string][]byte{"yaml": asYAML, "json": asJSON} {
		t.Run(format, func(t *testing.T) {
			ref, err := snapshot.LoadReference(bytes.NewReader(data), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := snapshot.Load(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Pods) != len(ref.Pods) || len(got.Nodes) != len(ref.Nodes) || len(got.PDBs) != len(ref.PDBs) {
				t.Fatalf("loaded %s, the reference %s", got.Counts(), ref.Counts())
			}
			if got.Pods[0].ManagedFields != nil || got.Nodes[0].Status.Images != nil || len(ref.Pods[0].ManagedFields) == 0 {
				t.Fatal("the bulk was not left out, or not in the input")
			}
			for _, consolidation := range []bool{false, true} {
				o := plan.Options{Consolidation: plan.Consolidation{Enabled: consolidation}}
				want, err := plan.New(o).Plan(context.Background(), ref)
				if err != nil {
					t.Fatal(err)
				}
				have, err := plan.New(o).Plan(context.Background(), got)
				if err != nil {
					t.Fatal(err)
				}
				if want.Summary.DrainableNodes == 0 {
					t.Fatal("nothing drainable: the test shows nothing")
				}
				if !reflect.DeepEqual(have, want) {
					hj, _ := json.Marshal(have.Summary)
					wj, _ := json.Marshal(want.Summary)
					t.Errorf("consolidation %v: the plans differ\nloaded    %s\nreference %s", consolidation, hj, wj)
				}
			}
		})
	}
}

// withBulk gives an object what loading leaves out: managed fields, and
// kubectl apply's copy of the object.
func withBulk(m *metav1.ObjectMeta, obj any) {
	applied, _ := json.Marshal(obj)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = string(applied)
	m.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    "kubectl-client-side-apply",
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1",
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`),
	}}
}

// The controllers' cache transform changes no plan, and planning changes
// none of its input. A generated cluster whose pods carry what Transform
// drops (environment, commands, probes, hooks) and the bulk loading leaves
// out is planned as read, and again after Transform: the same plans, with
// and without consolidation. The controllers plan the cache's own objects
// (FromReader copies nothing), so the planner must leave them as they were.
func TestTransformChangesNoPlan(t *testing.T) {
	read := generated(t, 120)
	for _, p := range read.Pods {
		withBulk(&p.ObjectMeta, p)
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Env = []corev1.EnvVar{{Name: "MODE", Value: "serve"}}
			c.Command, c.Args = []string{"/app"}, []string{"--port=8080"}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
		}
		withKubelet(p)
	}
	before := read.DeepCopy()
	trimmed := read.DeepCopy()
	for _, objs := range [][]any{anys(trimmed.Nodes), anys(trimmed.Pods), anys(trimmed.PDBs)} {
		for _, o := range objs {
			if _, err := snapshot.Transform(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c := trimmed.Pods[0].Spec.Containers[0]; c.Env != nil || c.Command != nil || c.ReadinessProbe != nil || c.Lifecycle != nil ||
		c.VolumeMounts != nil || trimmed.Pods[0].ManagedFields != nil || c.Resources.Requests == nil {
		t.Fatalf("Transform left %+v", c)
	}
	if p := trimmed.Pods[0]; len(p.Spec.Volumes) != 1 || p.Status.PodIP != "" || p.Status.ContainerStatuses[0].Image != "" ||
		p.Status.ContainerStatuses[0].AllocatedResources == nil {
		t.Fatalf("Transform left volumes %+v, status %+v", p.Spec.Volumes, p.Status)
	}
	prices := v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"synthetic.8x32": {OnDemand: 0.4, Spot: 0.12}}}
	for _, consolidation := range []bool{false, true} {
		o := plan.Options{Pricing: prices, Consolidation: plan.Consolidation{Enabled: consolidation}}
		want, err := plan.New(o).Plan(context.Background(), read)
		if err != nil {
			t.Fatal(err)
		}
		have, err := plan.New(o).Plan(context.Background(), trimmed)
		if err != nil {
			t.Fatal(err)
		}
		if want.Summary.DrainableNodes == 0 || (consolidation && want.Summary.ConsolidatedNodes == 0) {
			t.Fatalf("consolidation %v: nothing drainable or consolidated: the test shows nothing", consolidation)
		}
		if !reflect.DeepEqual(have, want) {
			hj, _ := json.Marshal(have.Summary)
			wj, _ := json.Marshal(want.Summary)
			t.Errorf("consolidation %v: the plans differ\ntransformed %s\nas read     %s", consolidation, hj, wj)
		}
	}
	if !reflect.DeepEqual(read, before) {
		t.Error("planning changed the snapshot it was given")
	}
}

// withKubelet gives a pod what admission and the kubelet add to a real one:
// the service account token volume and its mount, a local volume, the pod's
// IP, and a status for each container (with the resources it runs with).
func withKubelet(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	p.Status.PodIP, p.Status.PodIPs = "10.0.3.7", []corev1.PodIP{{IP: "10.0.3.7"}}
	p.Status.HostIP, p.Status.HostIPs = "192.168.0.3", []corev1.HostIP{{IP: "192.168.0.3"}}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Image: "example/app:1.0", ImageID: "example/app@sha256:0123", ContainerID: "containerd://4567",
			State:              corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}},
			AllocatedResources: c.Resources.Requests.DeepCopy(),
			Resources:          &corev1.ResourceRequirements{Requests: c.Resources.Requests.DeepCopy()},
		})
	}
}

func anys[T any](objs []*T) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// generated is a cluster of internal/gencluster with the given number of
// nodes, read by the reference loader.
func generated(t *testing.T, nodes int) *snapshot.Snapshot {
	t.Helper()
	opts := gencluster.DefaultOptions()
	opts.Nodes = nodes
	c, err := gencluster.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.LoadReference(&out, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
