// Command strata is Strata's single binary: server, mover and client.
package main

import (
	"os"

	"github.com/strata-storage/strata/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
