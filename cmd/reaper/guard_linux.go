package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cgreaper/reaper/reaper"
)

// guard runs command (serve, run) as the guard of its server (see reaper.Guard): the server is this
// program again, with the same arguments, as a child in a session of its own. The guard forwards every
// signal that would end it, waits for the server, cleans up whatever the server left, and exits with
// the server's status.
func guard(command string, args []string, getenv func(string) string, stderr io.Writer) int {
	log := earlyLogger(stderr, args, getenv).With("guard", os.Getpid())
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append(append([]os.Signal{}, shutdownSignals...), ignoredSignals...)...)
	g, err := reaper.StartGuard(reaper.GuardOptions{
		Argv:   append([]string{os.Args[0], command}, args...),
		Setsid: true,
		Logger: log,
	})
	if err != nil {
		signal.Stop(sigs)
		fmt.Fprintf(stderr, "reaper %s: %v\n", command, err)
		return 1
	}
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for sig := range sigs {
			if sig == syscall.SIGPIPE {
				continue // this process's own writes; the server has its own
			}
			if err := g.Signal(sig.(syscall.Signal)); err != nil {
				log.Warn("forwarding a signal failed", "signal", sig.String(), "error", err)
			}
		}
	}()
	res := g.Wait()
	signal.Stop(sigs)
	close(sigs)
	<-forwarded
	if res.Signal != 0 || len(res.Killed) > 0 || res.Err != nil {
		attrs := []any{"server", g.Pid(), "status", res.Code, "killed", len(res.Killed)}
		if res.Signal != 0 {
			attrs = append(attrs, "signal", res.Signal.String())
		}
		if len(res.Killed) > 0 {
			attrs = append(attrs, "processes", res.Killed)
		}
		if res.Instance.Slice != "" {
			attrs = append(attrs, "slice", res.Instance.Slice)
		}
		if res.Err != nil {
			attrs = append(attrs, "error", res.Err)
		}
		log.Warn("the server ended without cleaning up; the guard did", attrs...)
	}
	return res.Code
}
