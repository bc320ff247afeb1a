package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cgreaper/reaper/cmd/reaper/internal/early"
	"github.com/cgreaper/reaper/internal/instance"
)

// guardSpec says how a command runs under its guard (early.ServerOptions says how its server starts).
type guardSpec struct {
	command string
	// crashed, if non-zero, is the exit status when the server dies of a signal (reaper run: the
	// job's own status is unknown then); otherwise 128+n for signal n.
	crashed int
	// exit, if set, ends the process once the server is gone and cleaned up after (see exitFunc).
	exit exitFunc
}

// guard runs a command (serve, run) as the guard of its server (see instance.Guard): the server is this
// program again, with the same arguments, as its child, started by package early before main ran. The
// guard forwards every signal that would end it, waits for the server, cleans up whatever the server
// left, and exits with the server's status. It logs in the format the command's --log-format and
// --log-level (or REAPER_LOG_*) ask for. A signal that comes before main has asked for it ends the
// guard, as it did before the server started: the server then learns of it from guard.Signal.
func guard(spec guardSpec, args []string, getenv func(string) string, stderr io.Writer) int {
	command := spec.command
	log := earlyLogger(stderr, args, getenv).With("guard", os.Getpid())
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, handledSignals()...)
	// The server started from the package initialisation, as a rule; in process (tests), now.
	started, _, err := early.Server()
	opts, _ := early.ServerOptions(append([]string{os.Args[0], command}, args...))
	var g *instance.Guard
	if err == nil {
		g, err = instance.StartGuard(instance.GuardOptions{Server: opts, Started: started, Logger: log})
	}
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
	code := res.Code
	if res.Signal != 0 && spec.crashed != 0 {
		code = spec.crashed
	}
	spec.exit.now(code)
	// In process: stop forwarding. signal.Stop waits on the runtime for each signal it gives up (the
	// runtime's signal-mask thread answers each) and then for delivery to quiesce, yielding. This
	// goroutine is locked to its thread (the server's parent-death signal follows it), where each
	// such wait hands the processor to another thread and back: 0.5-1.3 ms. From another goroutine,
	// 0.17-0.64 ms.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		signal.Stop(sigs)
	}()
	<-stopped
	close(sigs)
	<-forwarded
	return code
}
