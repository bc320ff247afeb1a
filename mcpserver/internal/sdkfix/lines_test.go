package sdkfix

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/jsonlimit"
)

// testLimits refuses a tools/call (or a batch) over call bytes and any other message over other
// bytes, and every message over jsonlimit's bounds: the shape of mcpserver's limits, with words of
// its own.
type testLimits struct{ call, other int }

func (l testLimits) Scanner() *jsonlimit.Scanner {
	return &jsonlimit.Scanner{Limits: jsonlimit.Limits{Depth: 32, Values: 10000}}
}

func (l testLimits) Most() int { return max(l.call, l.other) }

func (l testLimits) Check(sc *jsonlimit.Scanner, size int64) string {
	limit := l.other
	if sc.Method() == "tools/call" || sc.Batch {
		limit = l.call
	}
	switch {
	case size > int64(limit):
		return fmt.Sprintf("%q over %d bytes", sc.Method(), limit)
	case sc.Err != nil:
		return "refused: " + sc.Err.Error()
	}
	return ""
}

// TestLineReaderRefuses: the stdio framing drops, and reports with the id and code of its answer,
// every line over its limits and every line that is no JSON-RPC message, and hands on the rest.
func TestLineReaderRefuses(t *testing.T) {
	const other = 64 << 10
	long := `{"jsonrpc":"2.0","method":"tools/call","params":{"c":"` + strings.Repeat("y", 100<<10) + `"},"id":9}`
	wide := `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{` + strings.Repeat(`"k":0,`, 10000) + `"z":1}}}`
	ping := `{"jsonrpc":"2.0","id":"p","method":"ping","params":{"pad":"` + strings.Repeat("z", other) + `"}}`
	a, b := `{"jsonrpc":"2.0","method":"a"}`, `{"jsonrpc":"2.0","id":2,"method":"b"}`
	in := strings.Join([]string{a, long, wide, b, ping, "hello", `{"jsonrpc":"2.0"}`, `{"id":4,"method":"c"}`,
		`{"jsonrpc":"2.0","method":"n","params":`, `{"jsonrpc":"2.0","id":{},"method":"d"}`, "", long}, "\n") // the last one cut by the end of input
	var refused []string
	r := &lineReader{src: bufio.NewReaderSize(strings.NewReader(in), 16), limits: testLimits{call: 100 << 10, other: other}}
	r.refuse = func(id []byte, code int, why string, size int64) {
		refused = append(refused, fmt.Sprintf("%s %d %s", id, code, why))
	}
	out, err := io.ReadAll(r)
	if err != nil || string(out) != a+"\n"+b+"\n\n" {
		t.Errorf("read %q, %v", out, err)
	}
	want := []string{`9 -32600 "tools/call" over`, "10 -32600 refused: a message holds at most 10000 values", `"p" -32600 "ping" over `,
		"null -32700 not JSON", "null -32600 not a JSON-RPC message: a request names", `4 -32600 not a JSON-RPC message: "jsonrpc"`,
		"null -32700 not JSON", `null -32600 not a JSON-RPC message: "id" must be`, `9 -32600 "tools/call" over`}
	if len(refused) != len(want) {
		t.Fatalf("refused %q, want %d", refused, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(refused[i], w) {
			t.Errorf("refusal %d: %q, want it to begin %q", i, refused[i], w)
		}
	}
}

// BenchmarkLineChecks measures what the stdio framing costs a message: the limits' scan (the
// baseline, which every message had) and the check of its envelope added beside it (malformed), for
// a small tool call and one of about 900 KB.
//
//	go test -run '^$' -bench BenchmarkLineChecks ./mcpserver/internal/sdkfix
func BenchmarkLineChecks(b *testing.B) {
	l := testLimits{call: 1 << 20, other: 64 << 10}
	for name, line := range map[string][]byte{
		"small": []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}` + "\n"),
		"900KB": []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + strings.Repeat("echo hi; ", 100000) + `"}}}` + "\n"),
	} {
		b.Run(name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				l.Scanner().Feed(line)
			}
		})
		b.Run(name+"/envelope", func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, why := malformed(line); why != "" {
					b.Fatal(why)
				}
			}
		})
	}
}
