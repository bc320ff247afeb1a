package main

import (
	"os"

	"github.com/cgreaper/reaper/internal/pidns"
)

// initIfAsked makes this process the init of a session's PID namespace, and exits with its status,
// when a reaper server started the program as one (see pidns.RunInit).
func initIfAsked() {
	if pidns.IsInit(os.Args) {
		os.Exit(pidns.RunInit())
	}
}
