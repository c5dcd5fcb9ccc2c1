package main

import (
	"errors"
	"expvar"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// currentDev is the device of the size being run, for /debug/vars (a sweep makes one per
// size). Written by newSizeRun and done; read by the expvar function.
var currentDev atomic.Pointer[sdma.Device]

// publishOnce publishes the "sdma" expvar once per process (expvar.Publish panics on a repeat).
var publishOnce atomic.Bool

// serveDebug serves /debug/vars (expvar: the standard memstats and cmdline, and "sdma", the
// current device's counters) and /debug/pprof/ on addr until the returned stop is called.
func serveDebug(addr string, stderr io.Writer) (stop func(), err error) {
	if publishOnce.CompareAndSwap(false, true) {
		expvar.Publish("sdma", expvar.Func(func() any {
			if dev := currentDev.Load(); dev != nil {
				return dev.Vars()
			}
			return nil
		}))
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/vars", expvar.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "sdmaperf: -http: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "sdmaperf: serving /debug/vars and /debug/pprof/ on http://%s\n", ln.Addr())
	return func() { _ = srv.Close(); <-done }, nil
}
