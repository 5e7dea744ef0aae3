package snapshot_test

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// Pods of one workload share their equal parts after Transform; a pod whose
// part differs keeps its own; every value is the one decoded.
func TestTransformSharesEqualParts(t *testing.T) {
	pod := func(name, cpu string) *corev1.Pod {
		p := tu.Pod(name, tu.OwnedBy("ReplicaSet", "web-5d8f"), tu.CPU(cpu), tu.Tolerate("spot", "true"))
		p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d8f"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: corev1.LabelHostname}}}}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule}}
		return p
	}
	a, b, other := pod("web-1", "500m"), pod("web-2", "500m"), pod("web-3", "1")
	other.Labels = map[string]string{"app": "web", "pod-template-hash": "77c1"}
	other.Spec.TopologySpreadConstraints[0].MaxSkew = 2
	decoded := []*corev1.Pod{a.DeepCopy(), b.DeepCopy(), other.DeepCopy()}
	for _, p := range []*corev1.Pod{a, b, other} {
		if _, err := snapshot.Transform(p); err != nil {
			t.Fatal(err)
		}
	}
	same := func(what string, x, y any, want bool) {
		t.Helper()
		if got := reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer(); got != want {
			t.Errorf("%s shared: %v, want %v", what, got, want)
		}
	}
	same("labels", a.Labels, b.Labels, true)
	same("owner references", a.OwnerReferences, b.OwnerReferences, true)
	same("tolerations", a.Spec.Tolerations, b.Spec.Tolerations, true)
	same("affinity", a.Spec.Affinity, b.Spec.Affinity, true)
	same("spread constraints", a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints, true)
	same("requests", a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests, true)
	same("different labels", a.Labels, other.Labels, false)
	same("different spread constraints", a.Spec.TopologySpreadConstraints, other.Spec.TopologySpreadConstraints, false)
	same("different requests", a.Spec.Containers[0].Resources.Requests, other.Spec.Containers[0].Resources.Requests, false)
	same("equal affinity of another workload", a.Spec.Affinity, other.Spec.Affinity, true)
	for i, p := range []*corev1.Pod{a, b, other} {
		if !reflect.DeepEqual(p, decoded[i]) {
			t.Errorf("%s changed by Transform:\n%+v\nwas\n%+v", p.Name, p, decoded[i])
		}
	}
}

// BenchmarkCachedPod reports the heap a cached pod holds, decoded from
// protobuf as an informer decodes it, as read and after Transform: 15,000
// pods of 500 Deployments, each as a kubelet reports it (four conditions, a
// container status, the pod's IPs) with what admission adds (the service
// account token volume and mount, the not-ready and unreachable
// tolerations), an environment and a readiness probe.
//
//	go test ./internal/snapshot -run '^$' -bench CachedPod -benchtime 1x
func BenchmarkCachedPod(b *testing.B) {
	const pods, perWorkload = 15000, 30
	encoded := make([][]byte, pods)
	for i := range encoded {
		w := fmt.Sprintf("app-%03d", i/perWorkload)
		p := tu.Pod(fmt.Sprintf("%s-7d9c5f-%05d", w, i), tu.InNamespace("shop"), tu.OwnedBy("ReplicaSet", w+"-7d9c5f"), tu.CPU("250m"), tu.Memory("512Mi"),
			tu.OnNode(fmt.Sprintf("node-%03d", i/30)))
		p.Labels = map[string]string{"app.kubernetes.io/name": w, "pod-template-hash": "7d9c5f"}
		p.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		p.GenerateName, p.ResourceVersion = w+"-7d9c5f-", fmt.Sprint(100000+i)
		seconds := int64(300)
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds}}
		p.Spec.DNSPolicy, p.Spec.ServiceAccountName, p.Spec.SchedulerName = corev1.DNSClusterFirst, "default", corev1.DefaultSchedulerName
		c := &p.Spec.Containers[0]
		c.Image, c.ImagePullPolicy = "example/app:1.0", corev1.PullIfNotPresent
		c.Env = []corev1.EnvVar{{Name: "MODE", Value: "serve"}, {Name: "PORT", Value: "8080"}, {Name: "LOG_LEVEL", Value: "info"}}
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
		c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
		withKubelet(p)
		now := metav1.Now()
		p.Status.Phase, p.Status.QOSClass, p.Status.StartTime = corev1.PodRunning, corev1.PodQOSBurstable, &now
		for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		var err error
		if encoded[i], err = p.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	for _, transform := range []bool{false, true} {
		b.Run(fmt.Sprintf("transform=%t", transform), func(b *testing.B) {
			for range b.N {
				before := liveHeap()
				kept := make([]*corev1.Pod, pods)
				for i, data := range encoded {
					p := &corev1.Pod{}
					if err := p.Unmarshal(data); err != nil {
						b.Fatal(err)
					}
					if transform {
						if _, err := snapshot.Transform(p); err != nil {
							b.Fatal(err)
						}
					}
					kept[i] = p
				}
				b.ReportMetric(float64(liveHeap()-before)/pods, "bytes/pod")
				runtime.KeepAlive(kept)
			}
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
