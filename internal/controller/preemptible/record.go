package preemptible

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DrainedAnnotation holds a Record as JSON: the node was drained before the
// end of its VM's run and stays cordoned. It is the controller's only state:
// a restarted controller knows which nodes it already drained, and lifts the
// cordon once the VM behind the Node object is replaced.
const DrainedAnnotation = "spotter.dev/preemptible-drained"

// Record is the controller's record of a drained node.
type Record struct {
	// At is when the drain ended.
	At metav1.Time `json:"at"`
	// RunEnd is the end of the run the node was drained for.
	RunEnd metav1.Time `json:"runEnd"`
	// BootID is the node's boot (status.nodeInfo.bootID) when it was
	// drained: a node that reports another boot runs on another VM.
	BootID string `json:"bootID,omitempty"`
	// Cordoned is true when the node was schedulable before the drain: the
	// cordon is the controller's, and is lifted with the record.
	Cordoned bool `json:"cordoned,omitempty"`
}

// RecordOf returns the controller's record on node; nil when it has none.
func RecordOf(node *corev1.Node) (*Record, error) {
	raw, ok := node.Annotations[DrainedAnnotation]
	if !ok {
		return nil, nil
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return nil, fmt.Errorf("annotation %s on node %s is not a drain record: %w", DrainedAnnotation, node.Name, err)
	}
	return r, nil
}
