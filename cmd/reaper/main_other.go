//go:build !linux

package main

import "fmt"

// linuxOnly refuses a command elsewhere than on Linux: reaper's guarantee rests on cgroups, pidfds,
// the child subreaper and /proc.
func linuxOnly(command string, e env, code int) int {
	fmt.Fprintf(e.stderr, "reaper %s: reaper runs only on Linux\n", command)
	return code
}

func serve(_ []string, e env) int        { return linuxOnly("serve", e, 1) }
func sweepCommand(_ []string, e env) int { return linuxOnly("sweep", e, 1) }
func ps(_ []string, e env) int           { return linuxOnly("ps", e, 1) }
func runCommand(_ []string, e env) int   { return linuxOnly("run", e, 125) }

// closeInherited and initIfAsked do nothing: every command that starts a process is Linux-only.
func closeInherited() {}
func initIfAsked()    {}
