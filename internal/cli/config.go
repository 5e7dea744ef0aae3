package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "config",
		Example: `  spotter config validate spotter.yaml
  spotter config defaults > spotter.yaml`,
		Short: "Check and print SpotterConfiguration files",
	}
	cmd.AddCommand(newConfigValidateCommand(), newConfigDefaultsCommand())
	return cmd
}

func newConfigValidateCommand() *cobra.Command {
	var o configOptions
	cmd := &cobra.Command{
		Use:   "validate FILE [flags]",
		Short: "Check a configuration file; print every problem with its field path",
		Long: `Decodes the file strictly, applies the given flag overrides and the defaults,
and validates the result. Prints "valid" and exits 0, or lists every problem
(unknown fields, wrong types, values out of range, with the allowed values) and
exits 1. The file is the argument, or -f FILE.`,
		Example: `  spotter config validate spotter.yaml
  spotter config validate -f spotter.yaml --dry-run   # with a flag's override`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if o.file != "" && o.file != args[0] {
					return fmt.Errorf("two files, %s (-f) and %s: give the file to validate once, as the argument or with -f", o.file, args[0])
				}
				o.file = args[0]
			}
			if o.file == "" {
				return errors.New("no file: give the configuration file to validate as the argument (spotter config validate FILE) or with -f FILE")
			}
			c, err := o.load()
			if err != nil {
				var invalid *v1alpha1.InvalidError
				if errors.As(err, &invalid) {
					return &exitError{code: 1, msg: invalid.Error()}
				}
				return err
			}
			for _, w := range v1alpha1.Warnings(c) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", o.file)
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

func newConfigDefaultsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "defaults",
		Example: `  spotter config defaults > spotter.yaml`,
		Short:   "Print the fully defaulted configuration as YAML",
		Long: `Prints a SpotterConfiguration with every field set to its default: a complete
starting point for a configuration file. Each field is documented in
pkg/apis/config/v1alpha1/types.go and docs/configuration.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := DefaultsYAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

// DefaultsYAML is the output of `spotter config defaults`.
func DefaultsYAML() ([]byte, error) {
	return v1alpha1.Marshal(v1alpha1.NewDefaults())
}
