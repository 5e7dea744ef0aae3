package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/snapshot"
)

// A Resident fed with every change answers as a snapshot built afresh from
// the cluster as it is then. Random clusters change step by step (pods
// deleted, recreated elsewhere, added, relabelled, ended, created Pending;
// now and then a node cordoned), every change is fed to the Resident, and
// after each step the questions a drain asks (pods of on-demand nodes: do
// they fit on spot, and on priced clusters on another on-demand node) are
// answered by the Resident and by the planner on a fresh snapshot: the same
// node, or the same reasons. A planner kept from step to step, as the
// controllers keep theirs (it remembers which pods share a template), plans
// each step as a new planner does.
func TestResidentAnswersAsAFreshSnapshot(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 20
	}
	ctx := context.Background()
	var questions, builds, applied, fit, plans int
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		s := randomCluster(uint64(seed), 1+seed%3)
		withoutPortConflicts(s)
		var opts Options
		priced := seed%2 == 1
		if priced {
			for _, n := range s.Nodes {
				n.Labels[InstanceTypeLabel] = "m5.xlarge"
			}
			opts = Options{Pricing: consolidationPrices, Consolidation: Consolidation{Enabled: true}}
		}
		p := New(opts)
		kept := New(opts)
		res := p.NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil })
		res.Fed()
		ch := newChanger(s, fmt.Sprintf("seed%d", seed))
		for step := range 25 {
			old, c, nodes := ch.change(r)
			switch {
			case nodes:
				res.Invalidate()
			case old == nil || c == nil || old.UID != c.UID:
				if old != nil {
					res.PodChanged(old, nil)
				}
				if c != nil {
					res.PodChanged(nil, c)
				}
			default:
				res.PodChanged(old, c)
			}
			got, err := kept.Plan(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			want, err := New(opts).Plan(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if diffs := comparePlans(got, want); len(diffs) > 0 {
				t.Fatalf("seed %d step %d: the kept planner's plan differs from a new one's: %v", seed, step, diffs)
			}
			plans++
			var asked []*corev1.Pod
			for _, pod := range s.Pods {
				if pod.Spec.NodeName != "" && !terminal(pod) && p.Classify(nodeNamed(s, pod.Spec.NodeName)).Class == classify.OnDemand {
					asked = append(asked, pod)
				}
			}
			for range min(3, len(asked)) {
				pod := asked[r.IntN(len(asked))]
				want, wantWhy, err := New(opts).FitsOnSpot(ctx, s, pod)
				if err != nil {
					t.Fatal(err)
				}
				got, gotWhy, err := res.FitsOnSpot(ctx, pod)
				if err != nil {
					t.Fatal(err)
				}
				if got != want || gotWhy != wantWhy {
					t.Fatalf("seed %d step %d: %s/%s on spot: resident %q (%s), fresh %q (%s)", seed, step, pod.Namespace, pod.Name, got, gotWhy, want, wantWhy)
				}
				questions++
				if want != "" {
					fit++
				}
				if !priced {
					continue
				}
				want, wantWhy, err = New(opts).FitsOnDemand(ctx, s, pod)
				if err != nil {
					t.Fatal(err)
				}
				got, gotWhy, err = res.FitsOnDemand(ctx, pod)
				if err != nil {
					t.Fatal(err)
				}
				if got != want || gotWhy != wantWhy {
					t.Fatalf("seed %d step %d: %s/%s on demand: resident %q (%s), fresh %q (%s)", seed, step, pod.Namespace, pod.Name, got, gotWhy, want, wantWhy)
				}
				questions++
			}
		}
		st := res.Stats()
		builds += st.Builds
		applied += st.Applied
	}
	// Most questions must be answered from a kept snapshot brought up to
	// date (a build per cluster and per node change, about 4 a cluster),
	// and answers must go both ways, or the test shows little.
	if applied < seeds*15 || builds > seeds*6 || fit < questions/10 || fit > questions*9/10 {
		t.Errorf("%d questions (%d fit), %d builds, %d changes applied: the test shows too little", questions, fit, builds, applied)
	}
	t.Logf("%d questions (%d fit), %d builds, %d changes applied, %d plans", questions, fit, builds, applied, plans)
}

// changer changes a cluster one step at a time, as the API would show it:
// pods deleted, recreated on another node, added, relabelled, ended,
// created Pending; now and then a node cordoned or uncordoned. Every pod
// object it makes has a resourceVersion of its own (as read from the API).
type changer struct {
	s            *snapshot.Snapshot
	prefix       string
	uid, version int
}

func newChanger(s *snapshot.Snapshot, prefix string) *changer {
	ch := &changer{s: s, prefix: prefix}
	for _, pod := range s.Pods {
		ch.revise(pod)
	}
	return ch
}

func (ch *changer) revise(pod *corev1.Pod) {
	ch.version++
	pod.ResourceVersion = fmt.Sprint(ch.version)
}

// renew returns a new pod made like pod (another replica).
func (ch *changer) renew(pod *corev1.Pod) *corev1.Pod {
	c := pod.DeepCopy()
	ch.uid++
	c.Name, c.UID = fmt.Sprintf("%s-r%d", pod.Name, ch.uid), types.UID(fmt.Sprintf("%s-new%d", ch.prefix, ch.uid))
	ch.revise(c)
	return c
}

// change makes one change: it returns the pod object removed or replaced
// (nil if none) and the one added or replacing it (nil if none), or nodes
// true when a node changed. The snapshot's slices are replaced, never
// modified, so earlier snapshots stay as they were.
func (ch *changer) change(r *rand.Rand) (old, pod *corev1.Pod, nodes bool) {
	s := ch.s
	i := r.IntN(len(s.Pods))
	old = s.Pods[i]
	switch op := r.IntN(8); {
	case op == 0 && len(s.Pods) > 5: // deleted
		s.Pods = slices.Delete(slices.Clone(s.Pods), i, i+1)
		return old, nil, false
	case op <= 2: // recreated on another node
		c := ch.renew(old)
		c.Spec.NodeName = freeHostPort(s, c, s.Nodes[r.IntN(len(s.Nodes))].Name)
		s.Pods = append(slices.Delete(slices.Clone(s.Pods), i, i+1), c)
		return old, c, false
	case op == 3: // another replica
		c := ch.renew(old)
		c.Spec.NodeName = freeHostPort(s, c, s.Nodes[r.IntN(len(s.Nodes))].Name)
		s.Pods = append(slices.Clone(s.Pods), c)
		return nil, c, false
	case op == 4: // relabelled: it joins another workload
		c := old.DeepCopy()
		c.Labels["app"] = s.Pods[r.IntN(len(s.Pods))].Labels["app"]
		ch.revise(c)
		s.Pods = slices.Clone(s.Pods)
		s.Pods[i] = c
		return old, c, false
	case op == 5: // ended
		c := old.DeepCopy()
		c.Status.Phase = corev1.PodSucceeded
		ch.revise(c)
		s.Pods = slices.Clone(s.Pods)
		s.Pods[i] = c
		return old, c, false
	case op == 6: // created, not scheduled yet
		c := ch.renew(old)
		c.Spec.NodeName = ""
		s.Pods = append(slices.Clone(s.Pods), c)
		return nil, c, false
	default: // a node cordoned or uncordoned
		k := r.IntN(len(s.Nodes))
		n := s.Nodes[k].DeepCopy()
		n.Spec.Unschedulable = !n.Spec.Unschedulable
		s.Nodes = slices.Clone(s.Nodes)
		s.Nodes[k] = n
		return nil, nil, true
	}
}

func nodeNamed(s *snapshot.Snapshot, name string) *corev1.Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// withoutPortConflicts leaves Pending every pod bound to a node where an
// earlier pod holds the same host port: the kubelet admits no such pod, and
// the scheduler's NodeInfo, which counts a port once, cannot take one of the
// two away (the planner never meets them).
func withoutPortConflicts(s *snapshot.Snapshot) {
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" && freeHostPort(s, p, p.Spec.NodeName) == "" {
			p.Spec.NodeName = ""
		}
	}
}

// freeHostPort returns node when no other pod bound there holds a host port
// of pod, and "" (Pending) otherwise.
func freeHostPort(s *snapshot.Snapshot, pod *corev1.Pod, node string) string {
	ports := hostPorts(pod)
	if len(ports) == 0 {
		return node
	}
	for _, o := range s.Pods {
		if o == pod || o.Spec.NodeName != node || terminal(o) {
			continue
		}
		for _, port := range hostPorts(o) {
			if slices.Contains(ports, port) {
				return ""
			}
		}
	}
	return node
}

func hostPorts(pod *corev1.Pod) []int32 {
	var out []int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out = append(out, p.HostPort)
			}
		}
	}
	return out
}
