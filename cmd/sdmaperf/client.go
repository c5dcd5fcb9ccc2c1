package main

import (
	"context"
	"errors"
	"io"
)

// runClient runs the benchmark. (The run loop lands with the sdma engine.)
func runClient(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	return errors.New("the run loop is not written yet")
}
