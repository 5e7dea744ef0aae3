// Command spotter is Spotter's controller manager and command line.
package main

import (
	"os"

	_ "time/tzdata" // schedules name IANA time zones; don't depend on the host's database

	"spotter.dev/spotter/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
