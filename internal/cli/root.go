// Package cli is the command tree of the spotter binary. cmd/spotter only calls
// Main, so tests can run every command in process.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Streams are the standard streams of a command run.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// exitError carries an exit code and a message already printed (or to print).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Main runs the spotter command line with args (without the program name) and
// returns the process exit code: 0 on success, 1 on any failure.
func Main(args []string, s Streams) int {
	root := NewRootCommand(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(s.Err, ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(s.Err, "error: %v\n", err)
	return 1
}

// NewRootCommand returns the spotter command tree writing to s.
func NewRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use: "spotter",
		Example: `  spotter simulate            # no cluster needed
  spotter plan                # read-only, on the current kubeconfig context`,
		Short: "Keep Kubernetes workloads on spot capacity without losing them",
		Long: `Spotter moves pods from on-demand to spot nodes when a scheduling simulation
says they fit, migrates on-demand nodes to spot make-before-break, and drains
spot nodes in priority order when the cloud takes them back.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.AddCommand(
		newVersionCommand(),
		newConfigCommand(),
		newLabCommand(),
		newPlanCommand(),
		newControllerCommand(),
		newSimulateCommand(),
		newCleanupCommand(),
	)
	return root
}
