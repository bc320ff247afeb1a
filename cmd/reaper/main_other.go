//go:build !linux

package main

import (
	"fmt"
	"io"
)

// linuxOnly refuses a command elsewhere than on Linux: reaper's guarantee rests on cgroups, pidfds,
// the child subreaper and /proc.
func linuxOnly(command string, stderr io.Writer, code int) int {
	fmt.Fprintf(stderr, "reaper %s: reaper runs only on Linux\n", command)
	return code
}

func serve(_ []string, _ func(string) string, _ io.Reader, _, w io.Writer, _ exitFunc) int {
	return linuxOnly("serve", w, 1)
}
func sweepCommand(_ []string, _ func(string) string, _, w io.Writer) int {
	return linuxOnly("sweep", w, 1)
}
func ps(_ []string, _ func(string) string, _, w io.Writer) int { return linuxOnly("ps", w, 1) }
func runCommand(_ []string, _ func(string) string, _, w io.Writer, _ exitFunc) int {
	return linuxOnly("run", w, 125)
}

// closeInherited and initIfAsked do nothing: every command that starts a process is Linux-only.
func closeInherited() {}
func initIfAsked()    {}
