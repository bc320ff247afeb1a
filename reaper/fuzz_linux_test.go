package reaper

import (
	"os/exec"
	"strings"
	"testing"
)

// FuzzShellQuote: any string (without NUL, which no argument can hold) quoted by shellQuote comes back
// unchanged from a real /bin/sh. The working-directory trap embeds a path this way.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "it's", `'"'`, "$(rm -rf /)", "`id`", "a\nb", `\'`, "'''", "$HOME ~ * ?"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh gave %q (%v) for %q quoted as %s", out, err, s, shellQuote(s))
		}
	})
}

// FuzzParseCwd: whatever a task writes into its working-directory file, the session's directory
// becomes an absolute path without NUL that fits in PATH_MAX, or stays as it was; and a path pwd
// prints comes back exactly.
func FuzzParseCwd(f *testing.F) {
	for _, s := range []string{"/\n", "/tmp\n", "/tmp", "relative\n", "/a\nb\n", "/a\n\n", "/a\x00b\n", "", "\n", "/" + strings.Repeat("x", maxPath) + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir, ok := parseCwd(b)
		if !ok {
			return
		}
		if !strings.HasPrefix(dir, "/") || strings.IndexByte(dir, 0) >= 0 || len(dir) >= maxPath {
			t.Errorf("parseCwd(%q) = %q", b, dir)
		}
		if dir+"\n" != string(b) {
			t.Errorf("parseCwd(%q) = %q: not what pwd printed", b, dir)
		}
	})
}
