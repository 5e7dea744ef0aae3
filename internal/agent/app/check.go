package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// check runs the steps of --check that follow the read of the node, prints a
// line per step and fails when one does: the metadata service (each notice
// path read once, with the watch's own requests), then a server-side dry run
// of the update a termination notice makes to the node, which the apiserver
// judges as it would the real one: RBAC, admission policies (the chart's hold
// the agent to the node its token names) and validation. Both steps run
// whatever the other's outcome, and the update is checked in dry-run mode too:
// it is what the agent needs once dry run is off.
func check(ctx context.Context, a v1alpha1.AgentConfig, client kubernetes.Interface, node *corev1.Node, out io.Writer) error {
	var failed []string
	if err := checkMetadata(ctx, a, node, out); err != nil {
		failed = append(failed, "metadata service")
	}
	if err := checkNodeUpdate(ctx, client, node.Name, out); err != nil {
		failed = append(failed, "node update")
	}
	if len(failed) > 0 {
		return fmt.Errorf("check failed: %s (see above)", strings.Join(failed, ", "))
	}
	fmt.Fprintln(out, "check passed")
	return nil
}

// checkMetadata reads each path of the metadata service of a's cloud once
// (the one detection finds, for auto) and prints the outcome.
func checkMetadata(ctx context.Context, a v1alpha1.AgentConfig, node *corev1.Node, out io.Writer) error {
	endpoint, err := watch.Endpoint(a.MetadataEndpoint)
	if err == nil {
		err = probe(ctx, a, node, endpoint, out)
	}
	if err != nil {
		fmt.Fprintf(out, "metadata service: FAILED: %v\n", err)
	}
	return err
}

func probe(ctx context.Context, a v1alpha1.AgentConfig, node *corev1.Node, endpoint string, out io.Writer) error {
	cloud, err := resolveCloud(ctx, a)
	if err != nil {
		return err
	}
	if a.Cloud == v1alpha1.CloudAuto {
		fmt.Fprintf(out, "metadata service: cloud auto: %s answers at %s\n", cloud, endpoint)
	}
	source, err := newSource(cloud, a, node, clock.RealClock{}, nil)
	if err != nil {
		return err
	}
	if err := source.Probe(ctx); err != nil {
		return fmt.Errorf("%s at %s: %w", cloud, endpoint, err)
	}
	paths := source.Paths()
	fmt.Fprintf(out, "metadata service: ok: %s at %s, read %s\n", cloud, endpoint, strings.Join(append(paths.Others, paths.Notices...), ", "))
	return nil
}

// checkNodeUpdate sends the node with every mark of a termination notice
// (interrupt.Marked) as a server-side dry-run update, and prints the outcome.
func checkNodeUpdate(ctx context.Context, client kubernetes.Interface, name string, out io.Writer) error {
	what := fmt.Sprintf("taints %s and %s, cordon, annotations %s and %s",
		interrupt.TaintKey, drain.DrainingTaintKey, interrupt.Annotation, drain.DrainingAnnotation)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		marked, err := interrupt.Marked(node, time.Now())
		if err != nil {
			return err
		}
		_, err = client.CoreV1().Nodes().Update(ctx, marked, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err != nil {
		err = fmt.Errorf("updating node %s (server-side dry run: %s): %w", name, what, err)
		fmt.Fprintf(out, "node update: FAILED: %v\n", err)
		return err
	}
	fmt.Fprintf(out, "node update: ok: the apiserver allows a notice's update of node %s (server-side dry run: %s)\n", name, what)
	return nil
}
