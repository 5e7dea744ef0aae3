package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command's --help shows an example, and every spotter command line of
// an example names commands and flags that exist and parse: an example cannot
// drift from the code.
func TestEveryCommandHasAWorkingExample(t *testing.T) {
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	var walk func(*cobra.Command)
	checked := 0
	walk = func(cmd *cobra.Command) {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" || strings.HasPrefix(cmd.CommandPath(), "spotter completion") {
			return
		}
		if strings.TrimSpace(cmd.Example) == "" {
			t.Errorf("%q has no example in its --help", cmd.CommandPath())
		}
		for _, line := range strings.Split(cmd.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			if _, after, ok := strings.Cut(line, "&& "); ok {
				line = after
			}
			line, _, _ = strings.Cut(line, ">")
			args := strings.Fields(line)
			if len(args) == 0 || args[0] != "spotter" {
				continue
			}
			found, rest, err := root.Find(args[1:])
			if err != nil || found == root && len(args) > 1 {
				t.Errorf("%q: example %q names no command: %v", cmd.CommandPath(), line, err)
				continue
			}
			found.InitDefaultHelpFlag()
			if err := found.ParseFlags(rest); err != nil {
				t.Errorf("%q: example %q: %v", cmd.CommandPath(), strings.TrimSpace(line), err)
			}
			if err := found.Flags().Set("help", "false"); err != nil {
				t.Error(err)
			}
			checked++
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if checked < 15 {
		t.Errorf("only %d example lines checked", checked)
	}
}
