// Command reaper runs shell commands for AI agents over MCP and guarantees that nothing a session
// started outlives it.
//
// Lock order. The command has one lock, signals.mu, held while it cuts short the teardowns under way
// (mcpserver.Server.Hurry, which takes Server.mu): signals.mu comes first, and nothing takes it with
// another lock held.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3" (see versionString).
var version = ""

const usage = `reaper: a cgroup-based process reaper that speaks MCP

Every MCP session gets its own cgroup v2 slice; when the session ends, every process it started dies,
including those that escaped with setsid, double forks or nohup.

Usage:
  reaper serve [flags]   serve MCP over stdio, or Streamable HTTP with --http [ADDR]
  reaper run [flags] -- COMMAND [ARGS...]
                         run a command (a CI job, a container's entrypoint) and kill whatever it
                         leaves running before exiting with its status
  reaper sweep [flags]   kill and remove what dead reaper instances left
  reaper ps [flags]      list instances, their sessions, tasks and processes (from cgroupfs and /proc)
  reaper version         print the version
  reaper help [COMMAND]  print this help, or a command's

Run "reaper COMMAND --help" for a command's flags; each can also be set from the environment
as REAPER_<NAME> (--idle-timeout as REAPER_IDLE_TIMEOUT).
`

func main() {
	closeInherited()
	initIfAsked()
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, os.Exit))
}

// env is what a command gets of its process besides its arguments: the environment, the standard
// files, and how it exits once its work is done (see exitFunc).
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	exit           exitFunc
}

// commands are the subcommands, by name.
func commands() map[string]func(args []string, e env) int {
	return map[string]func([]string, env) int{
		"serve": serve, "run": runCommand, "sweep": sweepCommand, "ps": ps, "version": versionCommand,
	}
}

// run dispatches a command line and returns the process's exit status.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, exit exitFunc) int {
	e := env{getenv, stdin, stdout, stderr, exit}
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
		return badUsage
	case slices.Contains([]string{"help", "--help", "-help", "-h"}, args[0]):
		return help(args[1:], e)
	case args[0] == "--version" || args[0] == "-version":
		return versionCommand(args[1:], e)
	case commands()[args[0]] != nil:
		return commands()[args[0]](args[1:], e)
	}
	fmt.Fprintf(stderr, "reaper: unknown command %q\n\n%s", args[0], usage)
	return badUsage
}

const versionUsage = `Usage: reaper version

Prints reaper's version and the Go version it was built with.
`

// versionCommand prints the version; it takes no argument but --help.
func versionCommand(args []string, e env) int {
	err := parseFlags(newFlagSet("version"), args, false, e.getenv)
	if code := parsed("version", versionUsage, err, e.stdout, e.stderr, badUsage); code >= 0 {
		return code
	}
	fmt.Fprintln(e.stdout, "reaper", versionString())
	return 0
}

// help prints the usage, or with the name of a command that command's help.
func help(args []string, e env) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(e.stdout, usage)
		return 0
	case len(args) == 1 && commands()[args[0]] != nil:
		return commands()[args[0]]([]string{"--help"}, e)
	}
	fmt.Fprintf(e.stderr, "reaper help: unexpected argument %q\nUsage: reaper help [COMMAND]\n", args[len(args)-1])
	return badUsage
}

// exitFunc ends the process with a command's status once the command's work is done, skipping the
// tidying only an in-process caller needs (signal.Stop, the joins of the signal and guard watchers),
// which a stdio client would wait for twice at every close. main passes os.Exit; a test passes nil,
// and the command returns.
type exitFunc func(code int)

// now exits with code if e is set; otherwise it returns code.
func (e exitFunc) now(code int) int {
	if e != nil {
		e(code)
	}
	return code
}

// versionString is what `reaper version` prints and the first log line carries.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return describeVersion(version, bi)
}

// describeVersion returns set when it is not empty (a release build's -ldflags "-X main.version=…").
// Otherwise it reads what the Go toolchain recorded in bi, followed by the Go version:
//   - the module version: v1.2.3 for `go install github.com/cgreaper/reaper/cmd/reaper@v1.2.3`, or a
//     pseudo-version holding the commit for a build in a VCS checkout (Go 1.24 and later);
//   - "devel-" and the first 12 digits of the VCS revision when the module version is "(devel)" but a
//     revision was stamped (older toolchains), with "-dirty" for a modified tree;
//   - "(devel)" when nothing is known (a build with -buildvcs=false);
//
// and "(unknown)" when bi is nil (a binary built without module support).
func describeVersion(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "(devel)"
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(12, len(s.Value))]
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			v = "devel-" + rev + dirty
		}
	}
	return v + " " + bi.GoVersion
}
