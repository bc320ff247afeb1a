package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repo is the repository's root; bin is the reaper binary built for the tests, in a temporary
// directory (the root has a directory named reaper).
var repo, bin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repo = filepath.Dir(filepath.Dir(wd))
	dir, err := os.MkdirTemp("", "reaper-docs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "reaper")
	build := exec.Command("go", "build", "-o", bin, "./cmd/reaper")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building reaper: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// subcommands are reaper's; a word after "reaper" that is none of them is not an invocation of it.
var subcommands = []string{"serve", "run", "ps", "sweep", "version", "help"}

// helpOf returns the flags (without their dashes) and the environment variables that `reaper sub
// --help` names.
func helpOf(t *testing.T, sub string) (flags, vars map[string]bool) {
	t.Helper()
	out, err := exec.Command(bin, sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("reaper %s --help: %v\n%s", sub, err, out)
	}
	flags, vars = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\[\$(REAPER_[A-Z_]+)\]`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	return flags, vars
}

// words splits a command line as the shell would into words, keeping quotes' contents and treating
// the operators that end a simple command as words of their own.
func words(cmd string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range cmd {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
		case r == ' ' || r == '\t':
			flush()
		case strings.ContainsRune("|;&<>", r):
			flush()
			out = append(out, string(r))
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

// checkInvocations checks every invocation of reaper in a command's words: its subcommand exists,
// and each --flag before the arguments is one of that subcommand's. It returns how many it found.
func checkInvocations(t *testing.T, where string, ws []string) int {
	t.Helper()
	n := 0
	for i := 0; i+1 < len(ws); i++ {
		if ws[i] != "reaper" && !strings.HasSuffix(ws[i], "/reaper") {
			continue
		}
		sub := ws[i+1]
		if !slices.Contains(subcommands, sub) {
			continue
		}
		n++
		flags, _ := helpOf(t, sub)
		for _, w := range ws[i+2:] {
			if w == "--" || strings.ContainsAny(w, "|;&<>") && len(w) == 1 {
				break
			}
			if name, ok := strings.CutPrefix(w, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				if !flags[name] {
					t.Errorf("%s: reaper %s has no flag --%s (reaper %s --help)", where, sub, name, sub)
				}
			}
		}
	}
	return n
}
