// Command pgsketch-proxy speaks the PostgreSQL wire protocol in front of a
// PostgreSQL server and manages pgsketch's catalog. Run it with --help.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
