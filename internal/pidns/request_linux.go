package pidns

import "github.com/cgreaper/reaper/internal/pidwire"

// Request is a process for the init to start (see pidwire.Request).
type Request = pidwire.Request

// InitArg is the first argument that makes this program the init of a PID namespace (see
// internal/pidinit).
const InitArg = pidwire.InitArg

// IsInit reports whether args (os.Args) ask for the init.
func IsInit(args []string) bool { return pidwire.IsInit(args) }
