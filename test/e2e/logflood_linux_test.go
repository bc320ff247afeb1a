package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestLogFlood: a client cannot fill reaper's log (and the disk or journal behind it) by sending,
// as fast as it can, a message the SDK logs an error for, or one that reaper refuses: those lines
// are rate-limited, and say how many were left out.
func TestLogFlood(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	cs := p.connect(t)
	const n = 3000
	start := time.Now()
	initialized := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	deep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`
	for i := range 2 * n {
		body := initialized
		if i%2 == 1 {
			body = deep // refused: nested over the bound
		}
		p.post(t, cs.ID(), body).Body.Close()
	}
	// At most logBurst (20) lines a second of both kinds together, over the seconds the flood took: counted,
	// not timed, so a slow machine that takes longer to send it allows more lines, never a flake.
	seconds := int(time.Since(start)/time.Second) + 2
	if r := bash(t, cs, "echo served"); r.Output != "served\n" {
		t.Errorf("after the flood: %+v", r)
	}
	log := p.stderr.String()
	lines := 0
	for _, msg := range []string{"duplicate initialized notification", "HTTP message refused"} {
		lines += strings.Count(log, msg)
	}
	if lines > 20*seconds { // one budget for both kinds
		t.Errorf("%d messages in %d s made %d log lines", 2*n, seconds, lines)
	}
	if !strings.Contains(log, "lines_left_out=") {
		t.Errorf("no line says how many were left out, after %d messages in %d s", 2*n, seconds)
	}
}
