package mcpserver

import (
	"strings"
	"testing"
)

// TestMessageLimits: a message over its method's size, or over the bounds of its depth or its count
// of values, is refused with words that name the limit and what to do; one within them is not.
func TestMessageLimits(t *testing.T) {
	l := messageLimits{callBytes: 100 << 10}
	for _, tc := range []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"c":"` + strings.Repeat("y", 100<<10) + `"},"id":9}`, "a tool call of 102464 bytes is over the limit of 100 KiB (--max-call-size); nothing of it was run"},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{` + strings.Repeat(`"k":0,`, maxValues) + `"z":1}}}`, "message refused: a message holds at most 10000 values"},
		{`{"jsonrpc":"2.0","id":"p","method":"ping","params":{"pad":"` + strings.Repeat("z", maxOtherBytes) + `"}}`, "a ping message of 65598 bytes is over the limit of 64 KiB; nothing of it was run"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}`, ""},
	} {
		sc := l.Scanner()
		sc.Feed([]byte(tc.msg))
		got := l.Check(sc, int64(len(tc.msg)))
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%.60s: %q, want it to begin %q", tc.msg, got, tc.want)
		}
	}
}
