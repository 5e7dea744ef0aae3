package plan

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	tu "spotter.dev/spotter/internal/testutil"
)

// The memo must give every pod exactly what the scheduler's own accounting
// gives it, whichever pod computed the shared answer first.
func TestResourceMemoIsTheSchedulersAccounting(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	shapes := map[string]func(*corev1.Pod){
		"plain": func(*corev1.Pod) {},
		"init container": func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
		},
		"sidecar": func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
		},
		"overhead": func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}
		},
		"extended resource": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		},
		"sub-milli cpu": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100500u")
		},
		"status as spec": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Resources: &corev1.ResourceRequirements{Requests: p.Spec.Containers[0].Resources.Requests.DeepCopy()}}}
		},
		"resized": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}}}
		},
		"pod-level resources": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}
		},
	}
	memo := newResourceMemo()
	for round := range 2 {
		for name, shape := range shapes {
			for _, cpu := range []string{"250m", "1"} {
				p := tu.Pod(name, tu.OwnedBy("ReplicaSet", "rs"), tu.CPU(cpu), tu.Memory("1Gi"))
				shape(p)
				got, want := memo.get(p), podResource(p)
				if !equality.Semantic.DeepEqual(got, want) {
					t.Errorf("round %d, %s, cpu %s: memo %+v, scheduler %+v", round, name, cpu, got.Resource, want.Resource)
				}
			}
		}
	}
}

// Quantities that are not whole millis must not share an answer with those
// they round to: sums round differently.
func TestResourceMemoKeepsSubMilliApart(t *testing.T) {
	twoContainers := func(name, each string) *corev1.Pod {
		p := tu.Pod(name, tu.OwnedBy("ReplicaSet", "rs"), tu.CPU(each))
		p.Spec.Containers = append(p.Spec.Containers, *p.Spec.Containers[0].DeepCopy())
		p.Spec.Containers[1].Name = "second"
		return p
	}
	memo := newResourceMemo()
	for _, p := range []*corev1.Pod{twoContainers("whole", "101m"), twoContainers("fraction", "100500u")} {
		if got, want := memo.get(p).Resource.GetMilliCPU(), podResource(p).Resource.GetMilliCPU(); got != want {
			t.Errorf("%s: memo %dm, scheduler %dm", p.Name, got, want)
		}
	}
}

// Pods of one controller with different affinity must not share parsed terms.
func TestPodInfoMemoParsesEachAffinity(t *testing.T) {
	memo := newPodInfoMemo()
	a := memo.get(tu.Pod("a", tu.OwnedBy("ReplicaSet", "rs"), tu.AntiAffinity("web", corev1.LabelHostname)))
	b := memo.get(tu.Pod("b", tu.OwnedBy("ReplicaSet", "rs"), tu.AntiAffinity("web", corev1.LabelHostname)))
	c := memo.get(tu.Pod("c", tu.OwnedBy("ReplicaSet", "rs"), tu.AntiAffinity("db", corev1.LabelHostname)))
	if a.Pod.Name != "a" || b.Pod.Name != "b" || c.Pod.Name != "c" {
		t.Fatalf("PodInfos carry the wrong pods: %s %s %s", a.Pod.Name, b.Pod.Name, c.Pod.Name)
	}
	if got := b.RequiredAntiAffinityTerms[0].TopologyKey; got != corev1.LabelHostname {
		t.Errorf("b's term has topology key %q", got)
	}
	web := map[string]string{"app": "web"}
	if !b.RequiredAntiAffinityTerms[0].Selector.Matches(labels.Set(web)) || c.RequiredAntiAffinityTerms[0].Selector.Matches(labels.Set(web)) {
		t.Error("c shares b's parsed terms though its anti-affinity differs")
	}
}

// A pod without pod affinity or anti-affinity gets the PodInfo NewPodInfo
// would build, without calling it.
func TestPlainPodInfo(t *testing.T) {
	p := tu.Pod("p", tu.OwnedBy("ReplicaSet", "rs"), tu.RequireNodeLabel("zone", "a"), tu.CPU("1"))
	var got framework.PodInfo
	newPodInfoMemo().fill(&got, p)
	want, err := framework.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("PodInfo %+v, NewPodInfo %+v", got, *want)
	}
}
