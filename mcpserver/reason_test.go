package mcpserver

import (
	"regexp"
	"testing"
	"time"
)

// TestEndReasonsAreWords: every end reason is one short lowercase word (it becomes a metric label),
// distinct from the others, and says something to a client in describe.
func TestEndReasonsAreWords(t *testing.T) {
	word := regexp.MustCompile(`^[a-z_]{1,16}$`)
	seen := map[string]bool{}
	for r := endReason(1); int(r) < len(reasons); r++ {
		w := r.String()
		if !word.MatchString(w) || seen[w] {
			t.Errorf("reason %d: %q is not a short word of its own", r, w)
		}
		seen[w] = true
		if r.describe(time.Minute) == "" {
			t.Errorf("reason %s has no description", w)
		}
	}
	if got := endReason(0).String(); got != "unknown" {
		t.Errorf("the zero reason is %q", got)
	}
}
