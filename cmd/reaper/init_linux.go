package main

import "github.com/cgreaper/reaper/internal/pidns"

// namespaceInit runs this process as the init of a session's PID namespace if args say it is one,
// and returns its exit status and true; otherwise it returns false at once.
func namespaceInit(args []string) (int, bool) {
	if !pidns.IsInit(args) {
		return 0, false
	}
	return pidns.Main(), true
}
