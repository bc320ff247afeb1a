package nsinit

import (
	"os"

	"github.com/cgreaper/reaper/internal/pidns"
)

// init never returns in the init of a PID namespace.
func init() {
	if pidns.IsInit(os.Args) {
		os.Exit(pidns.Main())
	}
}
