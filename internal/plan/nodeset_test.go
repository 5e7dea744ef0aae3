package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A nodeSet keeps, pod by pod, what the kube-scheduler's cache.Snapshot keeps
// in a mutation session: the same pods on each node with the same requests and
// ports, the same nodes in the affinity lists, the same claims in use.
func TestNodeSetKeepsWhatTheSchedulerSnapshotKeeps(t *testing.T) {
	logger := klog.Background()
	var adds, removes int
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		s := randomCluster(uint64(seed), 1)
		ours := newNodeSet(s.Nodes)
		theirs := cache.NewSnapshot(nil, s.Nodes)
		if err := theirs.StartMutations(); err != nil {
			t.Fatal(err)
		}
		type bound struct {
			pod  *corev1.Pod
			node string
		}
		var on []bound
		claims := []string{"data-0", "data-1", "data-2"}
		for step := range 300 {
			if len(on) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(on))
				b := on[i]
				on = slices.Delete(on, i, i+1)
				if err := ours.RemovePod(logger, b.pod, b.node); err != nil {
					t.Fatal(err)
				}
				if err := theirs.RemovePod(logger, b.pod, b.node); err != nil {
					t.Fatal(err)
				}
				removes++
			} else {
				pod := s.Pods[r.IntN(len(s.Pods))].DeepCopy()
				pod.UID = types.UID(fmt.Sprintf("seed%d-step%d", seed, step))
				pod.Name = string(pod.UID)
				if r.IntN(4) == 0 {
					pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claims[r.IntN(len(claims))]}}})
				}
				node := s.Nodes[r.IntN(len(s.Nodes))].Name
				pod.Spec.NodeName = node
				pi, err := framework.NewPodInfo(pod)
				if err != nil {
					t.Fatal(err)
				}
				if err := ours.AddPod(pi, node); err != nil {
					t.Fatal(err)
				}
				if err := theirs.AddPod(pi, node); err != nil {
					t.Fatal(err)
				}
				on = append(on, bound{pod, node})
				adds++
			}
			where := fmt.Sprintf("seed %d step %d", seed, step)
			for _, n := range s.Nodes {
				a, err := ours.Get(n.Name)
				if err != nil {
					t.Fatal(err)
				}
				b, err := theirs.Get(n.Name)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := nodeSummary(a), nodeSummary(b); got != want {
					t.Fatalf("%s: node %s holds %s in the nodeSet, %s in the scheduler's snapshot", where, n.Name, got, want)
				}
			}
			for _, l := range []struct {
				name         string
				ours, theirs func() ([]fwk.NodeInfo, error)
			}{
				{"affinity", ours.HavePodsWithAffinityList, theirs.HavePodsWithAffinityList},
				{"required anti-affinity", ours.HavePodsWithRequiredAntiAffinityList, theirs.HavePodsWithRequiredAntiAffinityList},
				{"non-hostname anti-affinity", ours.HavePodsWithRequiredNonHostScopedAntiAffinityList, theirs.HavePodsWithRequiredNonHostScopedAntiAffinityList},
				{"all", ours.List, theirs.List},
			} {
				a, _ := l.ours()
				b, _ := l.theirs()
				if got, want := nodeNames(a), nodeNames(b); !slices.Equal(got, want) {
					t.Fatalf("%s: %s list %v in the nodeSet, %v in the scheduler's snapshot", where, l.name, got, want)
				}
			}
			for _, c := range claims {
				key := "default/" + c
				if got, want := ours.IsPVCUsedByPods(key), theirs.StorageInfos().IsPVCUsedByPods(key); got != want {
					t.Fatalf("%s: claim %s in use: %v in the nodeSet, %v in the scheduler's snapshot", where, key, got, want)
				}
			}
		}
	}
	if adds < 3000 || removes < 1000 {
		t.Errorf("%d pods added, %d removed: the test shows too little", adds, removes)
	}
}

func nodeSummary(ni fwk.NodeInfo) string {
	var pods []string
	for _, pi := range ni.GetPods() {
		pods = append(pods, string(pi.GetPod().UID))
	}
	slices.Sort(pods)
	req := ni.GetRequested()
	return fmt.Sprintf("pods %v, %dm CPU, %d bytes, %d with affinity, %d with anti-affinity, %d ports",
		pods, req.GetMilliCPU(), req.GetMemory(), len(ni.GetPodsWithAffinity()), len(ni.GetPodsWithRequiredAntiAffinity()), ni.GetUsedPorts().Len())
}

func nodeNames(list []fwk.NodeInfo) []string {
	out := make([]string, len(list))
	for i, ni := range list {
		out[i] = ni.Node().Name
	}
	slices.Sort(out)
	return out
}
