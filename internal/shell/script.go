package shell

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Descriptors a command's shell may hold beside its standard ones: high, so that a script's own
// redirections (exec 3>file, exec 9>lockfile) do not meet them.
const (
	// CommandFD and GateFD are a ready shell's: the memory file its command is written into, and the
	// pipe whose end lets it read the command (see Loader). The loader closes both before the script
	// runs.
	CommandFD = 95
	GateFD    = 96
	// CwdFD is the write end of the pipe a foreground command's EXIT trap writes its directory to
	// (see Script).
	CwdFD = 97
)

// LoaderVar is the variable a ready shell's loader reads the command into; nothing else in a ready
// shell's command line names it (tests tell a ready shell by it).
const LoaderVar = "__reaper_command"

// Loader is a ready shell's script, for bash (bash -c Loader): wait until the pipe at GateFD reaches
// its end (whatever is written into it is read and dropped: only the end of every writer lets the
// shell go), read the command from the file at CommandFD up to its NUL (none means it was never
// written: exit), close both, and run the command with the loader's variable unset. bash reads a
// regular file in blocks, a pipe a byte at a time: hence a file for the command, and a pipe only to
// wait on. A loop's condition is exempt from errexit, which the environment may set (SHELLOPTS).
const Loader = `while read -r -u 96 ` + LoaderVar + `; do :; done; IFS= read -r -d '' -u 95 ` + LoaderVar + ` || exit; exec 95<&- 96<&-; eval "unset ` + LoaderVar + `; $` + LoaderVar + `"`

// Find returns the shell commands run with: shell if set (looked up in PATH), else bash from PATH,
// else /bin/sh.
func Find(shell string) (string, error) {
	if shell != "" {
		return exec.LookPath(shell)
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		return "", errors.New("no shell: neither bash in PATH nor /bin/sh")
	}
	return "/bin/sh", nil
}

// Name returns the name of the program the path shell leads to.
func Name(shell string) string {
	if real, err := filepath.EvalSymlinks(shell); err == nil {
		shell = real
	}
	return filepath.Base(shell)
}

// NamesHighFDs reports whether shell can name a descriptor above 9 in a redirection (>&97): bash,
// zsh, the ksh family and busybox's ash can; dash cannot. Decided by the name of the program the
// path leads to.
func NamesHighFDs(shell string) bool {
	switch Name(shell) {
	case "bash", "rbash", "zsh", "ksh", "ksh93", "mksh", "busybox":
		return true
	}
	return false
}

// Script prefixes command, if cwd is set, with a trap that writes the shell's final working
// directory, and a NUL, to the descriptor CwdFD when the shell exits, by whatever path: the end of
// the script, `exit 3`, a failed `cd`, errexit (see ReadCwd). The prefix shares the command's first
// line so that the shell's line numbers stay right. Nothing is written to the command's output, so
// no marker can be confused with what the command prints, and a top-level `&` backgrounds only its
// own part of the command. Subshells and background jobs do not inherit the trap. A command that is
// killed leaves the directory unchanged.
//
// A shell that can name descriptors above 9 (dup: see NamesHighFDs) writes to the descriptor itself,
// which is non-blocking: if the command's processes filled the pipe, the write fails and the
// directory stays as it was, rather than hold the shell's exit. Others (dash, which is often /bin/sh)
// open it again through /dev/fd, and that open blocks as any pipe does.
//
// With bash, two ways a command would lose its directory are covered, each only where the command's
// text names it, so that other commands pay nothing: a command that replaces the shell (`exec
// prog`) never runs the EXIT trap, so a DEBUG trap records the directory before each command whose
// text holds "exec"; and a command that sets its own EXIT trap replaces reaper's, so `trap` becomes a
// function that runs the builtin and then puts the recording in front of the EXIT trap, whatever it
// is now, keeping $? for it (see trapWrapper). What still loses the directory: an exec or a trap the
// text does not spell (eval "ex""ec prog", `command trap ...`, a sourced file), `set -T` with a DEBUG
// trap of the command's own, and, with dash, any exec or EXIT trap: dash has no DEBUG trap and no
// function may be named trap.
func Script(command string, cwd, dup, bash bool) string {
	if !cwd {
		return command
	}
	target := ">&" + strconv.Itoa(CwdFD)
	if !dup {
		target = ">>/dev/fd/" + strconv.Itoa(CwdFD)
	}
	record := `{ pwd; printf "\0"; } 2>/dev/null ` + target
	var debug string
	if bash && strings.Contains(command, "exec") {
		debug = `trap '[[ $BASH_COMMAND == *exec* ]] && ` + record + ` || :' DEBUG; `
	}
	if bash && strings.Contains(command, "trap") {
		return debug + trapWrapper(record) + command
	}
	return debug + `trap '` + record + `' EXIT; ` + command
}

// trapWrapper defines __reaper_cwd, which records the directory and returns the status it was called
// with, and a function trap that runs the builtin and then, in the shell itself (not a subshell, whose
// directory is not the command's), makes the EXIT trap start with "__reaper_cwd && :", followed by
// whatever the builtin left there. The && keeps errexit from ending the trap when the status is not
// zero (a command in an && list other than the last is exempt), and $? is the exit status still when
// the command's own handler starts. `trap -p EXIT` shows the recording in front of the handler.
func trapWrapper(record string) string {
	const call = `__reaper_cwd && :`
	return `__reaper_cwd() { local s=$?; ` + record + `; return $s; }; ` +
		`trap() { builtin trap "$@"; local r=$? t; [ "$BASHPID" = "$$" ] || return $r; t=$(builtin trap -p EXIT); ` +
		`if [ -z "$t" ]; then builtin trap '` + call + `' EXIT; else eval "set -- $t"; ` +
		`case $3 in '` + call + `'|'` + call + `; '*) ;; *) builtin trap -- "` + call + `; $3" EXIT;; esac; fi; return $r; }; ` +
		`builtin trap '` + call + `' EXIT; `
}
