//go:build !linux

package main

import (
	"fmt"
	"io"
)

// serve is Linux-only: reaper's guarantee rests on cgroups, pidfds, the child subreaper and /proc.
func serve(_ []string, _ func(string) string, _ io.Reader, _, stderr io.Writer, _ exitFunc) int {
	fmt.Fprintln(stderr, "reaper serve: reaper runs only on Linux")
	return 1
}

func sweepCommand(_ []string, _ func(string) string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "reaper sweep: reaper runs only on Linux")
	return 1
}

func ps(_ []string, _ func(string) string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "reaper ps: reaper runs only on Linux")
	return 1
}

func runCommand(_ []string, _ func(string) string, _, stderr io.Writer, _ exitFunc) int {
	fmt.Fprintln(stderr, "reaper run: reaper runs only on Linux")
	return 125
}

// closeInherited is Linux-only, as every command that starts a process is.
func closeInherited() {}

// initIfAsked does nothing: PID namespaces are Linux's.
func initIfAsked() {}
