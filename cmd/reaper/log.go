package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

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
