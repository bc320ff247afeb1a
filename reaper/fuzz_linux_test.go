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
