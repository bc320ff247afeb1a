package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cgreaper/reaper/cmd/reaper/internal/early"
	"github.com/cgreaper/reaper/internal/instance"
)

// guardSpec says how a command runs under its guard (early.ServerOptions says how its server starts).
type guardSpec struct {
	command string
	// crashed, if non-zero, is the exit status when the server dies of a signal (reaper run: the
	// job's own status is unknown then); otherwise 128+n for signal n.
	crashed int
	// exit, if set, ends the process once it has cleaned up after the server (see exitFunc).
	exit exitFunc
}

// guard is the rest of a guard's life (reaper serve, reaper run), when package early's first part
// did not end it: the server, this program again with the same arguments, started from early's
// initialisation, has ended without announcing a clean end, or something came to this process as
// its subreaper. guard cleans up whatever the server left (see instance.CleanUp), logs what it did
// in the format the command's --log-format and --log-level (or REAPER_LOG_*) ask for, and exits with
// the server's status. The signals early asked for stay asked for meanwhile.
func guard(spec guardSpec, args []string, getenv func(string) string, stderr io.Writer) int {
	command := spec.command
	log := earlyLogger(stderr, args, getenv).With("guard", os.Getpid())
	ended, tried, err, forwarded := early.Ended()
	if !tried {
		err = errors.New("a guard starts its server from the program's initialisation, not in process")
	}
	if err != nil {
		fmt.Fprintf(stderr, "reaper %s: %v\n", command, err)
		return 1
	}
	if forwarded != nil {
		log.Warn("forwarding a signal failed", "error", forwarded)
	}
	res := instance.CleanUp(instance.CleanUpOptions{Logger: log}, ended)
	if res.Signal != 0 || len(res.Killed) > 0 || res.Err != nil {
		attrs := []any{"server", ended.Pid, "status", res.Code, "killed", len(res.Killed)}
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
	return spec.exit.now(code)
}
