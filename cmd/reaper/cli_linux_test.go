package main

import (
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/inspect"
	"github.com/cgreaper/reaper/internal/sweep"
	"github.com/cgreaper/reaper/job"
)

// runCLI runs the command line args in this process with an empty environment and returns its exit
// status, standard output and standard error. Only command lines that end before a command does its
// work (help, usage errors) may be given: a valid serve or run would start a guard.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr strings.Builder
	code := run(args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr, nil)
	return code, stdout.String(), stderr.String()
}

// TestUsageErrors: every subcommand refuses what it cannot take (a flag it lacks, an argument too
// many, a value it cannot use, an empty one) with its usage status, the cause said once on stderr
// with the command's name, then its synopsis; nothing on stdout.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		code  int
		cause string
	}{
		{[]string{"version", "--bogus"}, 2, "reaper version: unknown flag --bogus"},
		{[]string{"version", "extra"}, 2, `reaper version: unexpected argument "extra"`},
		{[]string{"--version", "-x"}, 2, "reaper version: unknown flag -x"},
		{[]string{"serve", "--bogus"}, 2, "reaper serve: unknown flag --bogus"},
		{[]string{"serve", "extra"}, 2, `reaper serve: unexpected argument "extra"`},
		{[]string{"serve", "--http="}, 2, "reaper serve: --http: empty value"},
		{[]string{"serve", "--token="}, 2, "reaper serve: --token: empty value"},
		{[]string{"serve", "--grace"}, 2, "reaper serve: --grace needs a value"},
		{[]string{"serve", "--grace", "soon"}, 2, `reaper serve: --grace: invalid value "soon": want a duration`},
		{[]string{"serve", "--max-tasks", "many"}, 2, `reaper serve: --max-tasks: invalid value "many": want a whole number`},
		{[]string{"serve", "--max-tasks", "0"}, 2, "reaper serve: --max-tasks must be at least 1"},
		{[]string{"serve", "--memory-max", "12Q"}, 2, `reaper serve: --memory-max: "12Q" is not a size`},
		{[]string{"sweep", "--bogus"}, 2, "reaper sweep: unknown flag --bogus"},
		{[]string{"sweep", "extra"}, 2, `reaper sweep: unexpected argument "extra"`},
		{[]string{"sweep", "--containment", "vm"}, 2, "reaper sweep: "},
		{[]string{"ps", "--json=maybe"}, 2, `reaper ps: --json: invalid value "maybe": want true or false`},
		{[]string{"ps", "extra"}, 2, `reaper ps: unexpected argument "extra"`},
		// reaper run's own failures are 125, as GNU timeout's and env's, apart from any status of
		// the command it runs.
		{[]string{"run", "--bogus", "--", "true"}, 125, "reaper run: unknown flag --bogus"},
		{[]string{"run", "--timeout="}, 125, "reaper run: --timeout: empty value"},
		{[]string{"run"}, 125, "reaper run: no command given"},
		{[]string{"help", "bogus"}, 2, `reaper help: unexpected argument "bogus"`},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != tc.code || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want %d and nothing", tc.args, code, stdout, tc.code)
		}
		first, rest, _ := strings.Cut(stderr, "\n")
		if !strings.HasPrefix(first, tc.cause) {
			t.Errorf("%q: stderr starts %q, want %q", tc.args, first, tc.cause)
		}
		if !strings.HasPrefix(rest, "Usage: reaper ") {
			t.Errorf("%q: no synopsis after the cause:\n%s", tc.args, stderr)
		}
		if strings.Count(stderr, "reaper "+tc.args[0]+":") > 1 && tc.args[0] != "--version" {
			t.Errorf("%q: the cause is said more than once:\n%s", tc.args, stderr)
		}
	}
}

// TestHelp: --help (and -h, and `reaper help COMMAND`) prints the command's help on stdout and exits
// 0; the help names every flag GNU-style, as --name, with its environment variable, and never Go's
// -name.
func TestHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"serve":   definedFlags(t, "serve"),
		"run":     definedFlags(t, "run"),
		"sweep":   {"cgroup-root", "containment", "dry-run", "json", "state-dir"},
		"ps":      {"cgroup-root", "containment", "json", "state-dir"},
		"version": nil,
	} {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			code, stdout, stderr := runCLI(args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: reaper "+cmd) {
				t.Errorf("%q: exit %d, stderr %q, stdout starts %.40q", args, code, stderr, stdout)
			}
		}
		_, help, _ := runCLI(cmd, "--help")
		if m := regexp.MustCompile(`(?m)^\s+-[a-z]`).FindString(help); m != "" {
			t.Errorf("reaper %s --help shows a flag Go's way, %q:\n%s", cmd, m, help)
		}
		entries := regexp.MustCompile(`(?m)^  --`).FindAllStringIndex(help, -1)
		if len(entries) != len(flags) {
			t.Errorf("reaper %s --help lists %d flags, want %d (%v):\n%s", cmd, len(entries), len(flags), flags, help)
		}
		for _, f := range flags {
			entry := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f) + `( [^\n]+)?\n(        [^\n]*\n)*?        [^\n]*\[\$` + envName(f) + `\]\n`)
			if !entry.MatchString(help) {
				t.Errorf("reaper %s --help lacks --%s with [$%s]:\n%s", cmd, f, envName(f), help)
			}
		}
	}
	if code, stdout, _ := runCLI("help"); code != 0 || !strings.Contains(stdout, "reaper serve") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}

// definedFlags returns the names of the flags the subcommand cmd (serve or run) defines, from its
// own parser.
func definedFlags(t *testing.T, cmd string) []string {
	t.Helper()
	env := func(string) string { return "" }
	var err error
	if cmd == "serve" {
		_, err = parseServe([]string{"--help"}, env)
	} else {
		_, err = parseRun([]string{"--help"}, env)
	}
	var h *helpRequest
	if !errors.As(err, &h) {
		t.Fatalf("%s --help: %v", cmd, err)
	}
	var names []string
	h.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// TestEmptyLists: the JSON of sweep and ps has every list, [] when empty, at every depth.
func TestEmptyLists(t *testing.T) {
	for name, v := range map[string]any{
		"sweep": sweep.Report{Dead: []sweep.DeadInstance{{Name: "r1-2"}}},
		"ps":    inspect.Inspection{Instances: []inspect.InstanceView{{Sessions: []inspect.SessionView{{Name: "s"}}}}},
		"run":   job.Report{},
	} {
		var b strings.Builder
		if err := writeJSON(&b, v); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "null") {
			t.Errorf("%s: JSON holds null:\n%s", name, b.String())
		}
	}
	orig := sweep.Report{Dead: []sweep.DeadInstance{{Name: "r1-2"}}}
	writeJSON(&strings.Builder{}, orig)
	if orig.Dead[0].Processes != nil || orig.Live != nil {
		t.Error("writeJSON changed the value it was given")
	}
	var b strings.Builder
	writeJSON(&b, sweep.Report{})
	if !strings.Contains(b.String(), `"dead": []`) || strings.Contains(b.String(), "foreign") {
		t.Errorf("an empty sweep report: %s, want \"dead\": [] and no foreign (omitempty)", b.String())
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 processes", 1: "1 process", 2: "2 processes"} {
		if got := count(n, "process", "processes"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
