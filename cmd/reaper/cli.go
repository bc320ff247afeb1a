package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// The command line of every subcommand, as GNU programs have it: --name=value or --name value (Go's
// -name is taken too), flags before operands, "--" ending the flags. Every flag can be set from the
// environment as REAPER_<NAME>.

// badUsage is the exit status of a command line a command cannot take.
const badUsage = 2

// newFlagSet returns the flag set of the subcommand name. It only holds the flags: parseFlags parses,
// and parsed prints.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// helpRequest is parseFlags' answer to -h or --help, for the flags of fs. It matches flag.ErrHelp.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string        { return flag.ErrHelp.Error() }
func (h *helpRequest) Is(target error) bool { return target == flag.ErrHelp }

// parseFlags parses args into fs and then sets every flag not given from REAPER_<NAME> in the
// environment. It refuses a flag fs lacks, a flag without its value or with an empty one, and, unless
// operands is set, any argument after the flags (fs.Args() holds them otherwise). -h and --help
// return a *helpRequest.
func parseFlags(fs *flag.FlagSet, args []string, operands bool, getenv func(string) string) error {
	rest, err := setFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return &helpRequest{fs: fs}
	}
	if err != nil {
		return err
	}
	if !operands && len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err := fs.Parse(append([]string{"--"}, rest...)); err != nil { // keeps the operands in fs.Args()
		return err
	}
	return setFromEnv(fs, getenv)
}

// setFlags sets the flags at the start of args and returns the operands after them.
func setFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			return args[1:], nil
		}
		if len(a) < 2 || a[0] != '-' {
			return args, nil // an operand; "-" alone is one too
		}
		args = args[1:]
		spelled, value, hasValue := strings.Cut(a, "=")
		name := strings.TrimPrefix(strings.TrimPrefix(spelled, "-"), "-")
		f := fs.Lookup(name)
		switch {
		case f == nil && (name == "h" || name == "help"):
			return nil, flag.ErrHelp
		case f == nil || name == "" || name[0] == '-':
			return nil, fmt.Errorf("unknown flag %s", spelled)
		case isBoolFlag(f):
			if !hasValue {
				value = "true"
			}
		case !hasValue:
			if b, ok := f.Value.(interface{ Bare() string }); ok && (len(args) == 0 || strings.HasPrefix(args[0], "-")) {
				value = b.Bare() // a flag that may stand alone
				break
			}
			if len(args) == 0 {
				return nil, fmt.Errorf("--%s needs a value", name)
			}
			value, args = args[0], args[1:]
		}
		if value == "" {
			return nil, fmt.Errorf("--%s: empty value", name)
		}
		if err := fs.Set(name, value); err != nil {
			return nil, fmt.Errorf("--%s: %w", name, invalidValue(f, value, err))
		}
	}
	return nil, nil
}

// isBoolFlag reports whether f is a switch, given without a value.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// invalidValue says why value does not fit f: for the flag package's built-in types, whose errors
// say only "parse error" or "value out of range", what the flag wants.
func invalidValue(f *flag.Flag, value string, err error) error {
	want := ""
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			want = "want a duration such as 90s, 5m or 1h30m"
		case bool:
			want = "want true or false"
		case int, int64, uint, uint64:
			want = "want a whole number"
		case float64:
			want = "want a number"
		}
	}
	if want == "" {
		return err // the flag's own type says what is wrong
	}
	return fmt.Errorf("invalid value %q: %s", value, want)
}

// envName is the environment variable that sets the flag name: REAPER_IDLE_TIMEOUT for idle-timeout.
func envName(name string) string {
	return "REAPER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// setFromEnv sets every flag of fs not given on the command line from its variable in the
// environment; an empty variable counts as unset.
func setFromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v := getenv(name); v != "" && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s (--%s): %w", name, f.Name, invalidValue(f, v, err))
			}
		}
	})
	return envErr
}

// printFlags writes the help of fs's flags: each as --name and the kind of value it takes, then what
// it does, its default and its environment variable.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		if isBoolFlag(f) {
			kind = ""
		}
		fmt.Fprintf(w, "  --%s", f.Name)
		if kind != "" {
			fmt.Fprintf(w, " %s", kind)
		}
		fmt.Fprintln(w)
		if !slices.Contains([]string{"", "0", "0s", "false"}, f.DefValue) { // a default worth printing
			usage += " (default " + f.DefValue + ")"
		}
		usage += " [$" + envName(f.Name) + "]"
		for _, line := range wrap(usage, 90) {
			fmt.Fprintf(w, "        %s\n", line)
		}
	})
}

// wrap breaks s into lines of at most width bytes at spaces (a longer word stays whole).
func wrap(s string, width int) []string {
	var lines []string
	for _, word := range strings.Fields(s) {
		if n := len(lines); n > 0 && len(lines[n-1])+1+len(word) <= width {
			lines[n-1] += " " + word
		} else {
			lines = append(lines, word)
		}
	}
	return lines
}

// parsed reports the outcome of parsing a command line, given the command's usage text (its synopsis
// line first), and returns the exit status to end with, or -1 to go on. For help: the usage and the
// flags on stdout, and 0. For a command line the command cannot take: the error on stderr, once,
// with the synopsis, and bad (the command's usage status: 2, or 125 for reaper run as GNU timeout).
func parsed(command, usage string, err error, stdout, stderr io.Writer, bad int) int {
	var help *helpRequest
	switch {
	case err == nil:
		return -1
	case errors.As(err, &help):
		fmt.Fprint(stdout, usage)
		printFlags(stdout, help.fs)
		return 0
	}
	synopsis, _, _ := strings.Cut(usage, "\n")
	fmt.Fprintf(stderr, "reaper %s: %v\n%s\nRun 'reaper %s --help' for more information.\n", command, err, synopsis, command)
	return bad
}

// Log settings, shared by every command that logs: --log-format and --log-level, or REAPER_LOG_FORMAT
// and REAPER_LOG_LEVEL.
const (
	logFormatUsage = "log `format`: text (key=value) or json (one JSON object a line)"
	logLevelUsage  = "least `level` logged: debug, info, warn or error"
)

// newLogger makes the logger that format and level ask for, writing to w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// earlyLogger is the logger for a process that logs before it parses its flags (a guard, a server
// watching signals from its first instruction): --log-format and --log-level found in args, else in
// the environment. Settings it cannot use give the default, a text logger at info: the flag parser
// reports them.
func earlyLogger(w io.Writer, args []string, getenv func(string) string) *slog.Logger {
	format, _ := argValue(args, "log-format")
	level, _ := argValue(args, "log-level")
	log, err := newLogger(w, cmp.Or(format, getenv("REAPER_LOG_FORMAT"), "text"), cmp.Or(level, getenv("REAPER_LOG_LEVEL"), "info"))
	if err != nil {
		log, _ = newLogger(w, "text", "info")
	}
	return log
}

// argValue returns the value that args give the flag name before a "--" (the last one, as --name=v
// or --name v, with one dash or two), and whether they give it.
func argValue(args []string, name string) (value string, given bool) {
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		n, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || n != name {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			v = args[i]
		}
		value, given = v, true
	}
	return value, given
}
