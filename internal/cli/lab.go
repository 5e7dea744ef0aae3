package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"spotter.dev/spotter/internal/lab"
)

func defaultLabDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "spotter", "lab")
}

func newLabCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "lab",
		Example: `  spotter lab up --spot 3 --on-demand 2
  spotter lab down`,
		Short: "Run a local Kubernetes lab: real control plane, kwok nodes",
		Long: `The lab runs etcd, kube-apiserver, kube-scheduler, kube-controller-manager and
kwok (fake kubelets) as local processes, built from Go modules by
hack/kube-bin.sh (or found in $` + lab.BinDirEnv + `). It is the cluster Spotter's
e2e tests use; "lab up" starts one for you to try Spotter on.`,
	}
	cmd.AddCommand(newLabUpCommand(), newLabDownCommand())
	return cmd
}

func newLabUpCommand() *cobra.Command {
	var dir string
	var spot, onDemand int
	cmd := &cobra.Command{
		Use: "up",
		Example: `  spotter lab up                        # 2 on-demand and 3 spot kwok nodes
  spotter lab up --spot 5 --on-demand 1`,
		Short: "Start a lab in the background and print its kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spot < 0 || onDemand < 0 {
				return errors.New("--spot and --on-demand must be 0 or more")
			}
			if lab.Running(dir) {
				return fmt.Errorf("a lab is already running in %s: run `spotter lab down --dir %s` first", dir, dir)
			}
			// Leftovers of a lab that was not stopped cleanly.
			_ = lab.StopDir(dir)
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			bins, err := lab.FindBinaries(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			l, err := lab.Start(ctx, lab.Options{BinDir: bins, Dir: dir, Full: true, Detach: true, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(l.Config)
			if err != nil {
				return err
			}
			var specs []lab.NodeSpec
			zones := []string{"zone-a", "zone-b", "zone-c"}
			for i := range onDemand {
				specs = append(specs, lab.NodeSpec{Name: fmt.Sprintf("on-demand-%d", i), Class: lab.ClassOnDemand, Zone: zones[i%3]})
			}
			for i := range spot {
				specs = append(specs, lab.NodeSpec{Name: fmt.Sprintf("spot-%d", i), Class: lab.ClassSpot, Zone: zones[i%3]})
			}
			if err := lab.CreateNodes(ctx, client, specs...); err != nil {
				return err
			}
			if err := waitNodesReady(ctx, client, len(specs), time.Minute); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Lab running in %s with %d on-demand and %d spot kwok nodes.\n\n", l.Dir, onDemand, spot)
			fmt.Fprintf(out, "  export KUBECONFIG=%s\n", l.Kubeconfig)
			fmt.Fprintf(out, "  %s get nodes -L %s,%s\n\n", filepath.Join(bins, lab.Kubectl), lab.CapacityTypeLabel, lab.ZoneLabel)
			fmt.Fprintf(out, "Logs are in %s/logs. Stop it with: spotter lab down\n", l.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultLabDir(), "lab directory (certificates, kubeconfig, logs, PID files)")
	cmd.Flags().IntVar(&spot, "spot", 3, "spot kwok nodes to create")
	cmd.Flags().IntVar(&onDemand, "on-demand", 2, "on-demand kwok nodes to create")
	return cmd
}

func newLabDownCommand() *cobra.Command {
	var dir string
	var keep bool
	cmd := &cobra.Command{
		Use:     "down",
		Example: `  spotter lab down`,
		Short:   "Stop the lab started by `spotter lab up` and remove its directory",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lab.StopDir(dir); err != nil {
				return err
			}
			if !keep {
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Lab in %s stopped.\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultLabDir(), "lab directory")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the directory (logs) after stopping")
	return cmd
}

// waitNodesReady waits until n nodes report Ready.
func waitNodesReady(ctx context.Context, client kubernetes.Interface, n int, timeout time.Duration) error {
	ready := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		ready = 0
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d nodes Ready: %w", ready, n, err)
	}
	return nil
}
