package nsinit

import (
	"os"

	"github.com/cgreaper/reaper/internal/pidinit"
	"github.com/cgreaper/reaper/internal/pidwire"
)

// init never returns in the init of a PID namespace.
func init() {
	if pidwire.IsInit(os.Args) {
		os.Exit(pidinit.Main())
	}
}
