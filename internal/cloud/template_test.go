package cloud_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/drain"
)

// The taints Spotter itself puts on one node (the agent's on a notice, the
// drain engine's) are never copied into a group's template; the labeler's
// on-demand taint, which every on-demand node of a group gets, is.
func TestSpotterTaintsOfOneNodeAreNotCopied(t *testing.T) {
	for key, specific := range map[string]bool{
		interrupt.TaintKey:               true,
		drain.DrainingTaintKey:           true,
		"node.kubernetes.io/not-ready":   true,
		"ToBeDeletedByClusterAutoscaler": true,
		labeler.OnDemandTaintKey:         false,
		"nvidia.com/gpu":                 false,
	} {
		if got := cloud.NodeSpecificTaint(corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}); got != specific {
			t.Errorf("NodeSpecificTaint(%s) = %v, want %v", key, got, specific)
		}
	}
}
