package classify

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

type nodeOpt func(*corev1.Node)

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }
func annot(k, v string) nodeOpt { return func(n *corev1.Node) { n.Annotations[k] = v } }
func taint(k string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
}

func node(opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{}, Annotations: map[string]string{}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

type fakeCloud map[string]bool

func (f fakeCloud) IsSpot(n *corev1.Node) (bool, bool) {
	spot, ok := f[n.Name]
	return spot, ok
}

func TestClassify(t *testing.T) {
	cfg := v1alpha1.ClassificationConfig{
		SpotSelectors:     []string{"pool=cheap", "tier in (batch)"},
		OnDemandSelectors: []string{"pool=steady", "reliable"},
		ExcludeSelectors:  []string{"gpu=true"},
	}
	cases := []struct {
		name        string
		node        *corev1.Node
		cloud       CloudLookup
		want        Class
		wantReason  string
		wantWarning string
	}{
		{"karpenter spot", node(label(KarpenterCapacityLabel, "spot")), nil, Spot, "label karpenter.sh/capacity-type=spot", ""},
		{"karpenter on-demand", node(label(KarpenterCapacityLabel, "on-demand")), nil, OnDemand, "label karpenter.sh/capacity-type=on-demand", ""},
		{"karpenter reserved", node(label(KarpenterCapacityLabel, "reserved")), nil, OnDemand, "label karpenter.sh/capacity-type=reserved", ""},
		{"eks spot", node(label(EKSCapacityLabel, "SPOT")), nil, Spot, "label eks.amazonaws.com/capacityType=SPOT", ""},
		{"eks on-demand", node(label(EKSCapacityLabel, "ON_DEMAND")), nil, OnDemand, "label eks.amazonaws.com/capacityType=ON_DEMAND", ""},
		{"gke spot", node(label(GKESpotLabel, "true")), nil, Spot, "label cloud.google.com/gke-spot=true", ""},
		{"gke preemptible", node(label(GKEPreemptibleLabel, "true")), nil, Spot, "label cloud.google.com/gke-preemptible=true", ""},
		{"gke spot false says nothing", node(label(GKESpotLabel, "false")), nil, Unknown, "no capacity-type label, selector or cloud provider answer", ""},
		{"aks spot", node(label(AKSPriorityLabel, "spot")), nil, Spot, "label kubernetes.azure.com/scalesetpriority=spot", ""},
		{"aks regular", node(label(AKSPriorityLabel, "regular")), nil, OnDemand, "label kubernetes.azure.com/scalesetpriority=regular", ""},
		{"capi interruptible", node(label(InterruptibleLabel, "true")), nil, Spot, "label cluster.x-k8s.io/interruptible=true", ""},
		{"lifecycle spot", node(label(LifecycleLabel, "spot")), nil, Spot, "label node.kubernetes.io/lifecycle=spot", ""},
		{"lifecycle normal", node(label(LifecycleLabel, "normal")), nil, OnDemand, "label node.kubernetes.io/lifecycle=normal", ""},
		{"spot-worker role", node(label(SpotWorkerRoleLabel, "")), nil, Spot, "label node-role.kubernetes.io/spot-worker", ""},
		{"worker role", node(label(WorkerRoleLabel, "")), nil, OnDemand, "label node-role.kubernetes.io/worker", ""},
		{"worker role does not contradict a capacity label", node(label(WorkerRoleLabel, ""), label(KarpenterCapacityLabel, "spot")), nil, Spot, "label karpenter.sh/capacity-type=spot", ""},
		{"agreeing labels", node(label(KarpenterCapacityLabel, "spot"), label(EKSCapacityLabel, "SPOT")), nil, Spot, "label eks.amazonaws.com/capacityType=SPOT", ""},
		{"conflicting labels", node(label(KarpenterCapacityLabel, "spot"), label(EKSCapacityLabel, "ON_DEMAND")), nil, Unknown,
			"conflicting labels: label eks.amazonaws.com/capacityType=ON_DEMAND, label karpenter.sh/capacity-type=spot", ""},
		{"Spotter's interruptible label yields to a capacity label", node(label(InterruptibleLabel, "true"), annot(LabeledByUsAnnotation, "true"), label(KarpenterCapacityLabel, "on-demand")),
			nil, OnDemand, "label karpenter.sh/capacity-type=on-demand", ""},
		{"Spotter's interruptible label alone", node(label(InterruptibleLabel, "true"), annot(LabeledByUsAnnotation, "true")), nil, Spot, "label cluster.x-k8s.io/interruptible=true", ""},
		// Cluster API's label is the infrastructure's word: spot, whatever
		// other label the node has (the worker role, even a capacity label).
		{"Cluster API's interruptible label beats the worker role", node(label(InterruptibleLabel, "true"), label(WorkerRoleLabel, "")), nil, Spot, "label cluster.x-k8s.io/interruptible=true", ""},
		{"Cluster API's interruptible label beats a capacity label", node(label(InterruptibleLabel, "true"), label(KarpenterCapacityLabel, "on-demand")), nil, Spot, "label cluster.x-k8s.io/interruptible=true", ""},
		{"Cluster API writes the label with an empty value", node(label(InterruptibleLabel, ""), label(WorkerRoleLabel, "")), nil, Spot, "label cluster.x-k8s.io/interruptible=", ""},
		{"interruptible=false says nothing", node(label(InterruptibleLabel, "false"), label(WorkerRoleLabel, "")), nil, OnDemand, "label node-role.kubernetes.io/worker", ""},
		{"control plane marked interruptible warns", node(label(ControlPlaneLabel, ""), label(InterruptibleLabel, "true")), nil, ControlPlane, "label node-role.kubernetes.io/control-plane",
			"control-plane node looks like spot (label cluster.x-k8s.io/interruptible=true); Spotter never uses it as spot"},
		{"spot selector wins over labels", node(label("pool", "cheap"), label(KarpenterCapacityLabel, "on-demand")), nil, Spot, `spot selector "pool=cheap"`, ""},
		{"set-based spot selector", node(label("tier", "batch")), nil, Spot, `spot selector "tier in (batch)"`, ""},
		{"on-demand key selector", node(label("reliable", "")), nil, OnDemand, `on-demand selector "reliable"`, ""},
		{"both selectors", node(label("pool", "cheap"), label("reliable", "yes")), nil, Unknown, `matches both spot selector "pool=cheap" and on-demand selector "reliable"`, ""},
		{"control-plane label", node(label(ControlPlaneLabel, "")), nil, ControlPlane, "label node-role.kubernetes.io/control-plane", ""},
		{"master label", node(label(MasterLabel, "")), nil, ControlPlane, "label node-role.kubernetes.io/master", ""},
		{"control-plane taint", node(taint(ControlPlaneLabel)), nil, ControlPlane, "taint node-role.kubernetes.io/control-plane", ""},
		{"master taint", node(taint(MasterLabel)), nil, ControlPlane, "taint node-role.kubernetes.io/master", ""},
		{"control plane on spot warns", node(label(ControlPlaneLabel, ""), label(GKESpotLabel, "true")), nil, ControlPlane, "label node-role.kubernetes.io/control-plane",
			"control-plane node looks like spot (label cloud.google.com/gke-spot=true); Spotter never uses it as spot"},
		{"control plane beats exclude", node(label(ControlPlaneLabel, ""), label(ExcludeLabel, "true")), nil, ControlPlane, "label node-role.kubernetes.io/control-plane", ""},
		{"exclude label", node(label(ExcludeLabel, "true"), label(KarpenterCapacityLabel, "on-demand")), nil, Excluded, "label spotter.dev/exclude=true", ""},
		{"exclude label false", node(label(ExcludeLabel, "false"), label(KarpenterCapacityLabel, "on-demand")), nil, OnDemand, "label karpenter.sh/capacity-type=on-demand", ""},
		{"scale-down disabled", node(annot(ScaleDownDisabledAnnot, "true")), nil, Excluded, "annotation cluster-autoscaler.kubernetes.io/scale-down-disabled=true", ""},
		{"exclude selector", node(label("gpu", "true"), label("pool", "cheap")), nil, Excluded, `exclude selector "gpu=true"`, ""},
		{"cloud says spot", node(), fakeCloud{"n": true}, Spot, "cloud provider: spot instance", ""},
		{"cloud says on-demand", node(), fakeCloud{"n": false}, OnDemand, "cloud provider: on-demand instance", ""},
		{"cloud does not know", node(), fakeCloud{}, Unknown, "no capacity-type label, selector or cloud provider answer", ""},
		{"labels win over cloud", node(label(KarpenterCapacityLabel, "spot")), fakeCloud{"n": false}, Spot, "label karpenter.sh/capacity-type=spot", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(cfg, tc.cloud)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Classify(tc.node)
			if got.Class != tc.want || got.Reason != tc.wantReason || got.Warning != tc.wantWarning {
				t.Errorf("got %+v\nwant {Class:%s Reason:%s Warning:%s}", got, tc.want, tc.wantReason, tc.wantWarning)
			}
		})
	}
}

func TestIgnoreInterruptibleLabel(t *testing.T) {
	c := &Classifier{IgnoreInterruptibleLabel: true}
	if got := c.Classify(node(label(InterruptibleLabel, "true"), annot(LabeledByUsAnnotation, "true"))); got.Class != Unknown {
		t.Errorf("labeler's own label must not make a node spot: %+v", got)
	}
	if got := c.Classify(node(label(InterruptibleLabel, "true"), label(WorkerRoleLabel, ""))); got.Class != Spot {
		t.Errorf("Cluster API's label still counts for the labeler: %+v", got)
	}
}

func TestNewRejectsBadSelector(t *testing.T) {
	_, err := New(v1alpha1.ClassificationConfig{OnDemandSelectors: []string{"a=b=c"}}, nil)
	if err == nil || err.Error()[:35] != `classification.onDemandSelectors[0]` {
		t.Errorf("got %v", err)
	}
}
