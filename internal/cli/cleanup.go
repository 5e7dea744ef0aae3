package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"spotter.dev/spotter/internal/cleanup"
)

func newCleanupCommand() *cobra.Command {
	var kubeconfig, kubeContext string
	var dryRun bool
	cmd := &cobra.Command{
		Use: "cleanup [--kubeconfig K] [--context C] [--dry-run]",
		Example: `  spotter cleanup --dry-run      # say what would be removed
  spotter cleanup --context prod`,
		Short: "Remove every label, taint, annotation and cordon of Spotter's from the cluster's nodes",
		Long: `cleanup removes what Spotter leaves on nodes: the labeler's on-demand taint and
the interruptible label it wrote (not Cluster API's), drain marks (uncordoning a node
only when Spotter's drain or agent cordoned it), the agent's interruption taint and record,
and the migrator's selection (with the cluster autoscaler's deletion taint on the
nodes it selected). Run it once Spotter is stopped (after helm uninstall): a
running controller or agent would put its marks back. It needs get, list and
update on nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			out := cmd.OutOrStdout()
			verb := "cleaned"
			if dryRun {
				verb = "would clean"
			}
			nodes := 0
			err = cleanup.Run(ctx, client, dryRun, func(r cleanup.Result) {
				if r.Err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "node %s: %v\n", r.Node, r.Err)
					return
				}
				nodes++
				fmt.Fprintf(out, "%s node %s: %s\n", verb, r.Node, strings.Join(r.Changes, ", "))
			})
			if err != nil {
				return fmt.Errorf("cleaning %s: %w", rc.Host, err)
			}
			fmt.Fprintf(out, "%s %d nodes; no other node carries a mark of Spotter's\n", verb, nodes)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context (default: the current context)")
	f.BoolVar(&dryRun, "dry-run", false, "say what would be removed; change nothing")
	return cmd
}
