package mcpserver

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestLineReaderRefuses: the stdio framing drops, and reports with the id and code of its answer,
// every line over its limits and every line that is no JSON-RPC message, and hands on the rest.
func TestLineReaderRefuses(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"tools/call","params":{"c":"` + strings.Repeat("y", 100<<10) + `"},"id":9}`
	wide := `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{` + strings.Repeat(`"k":0,`, maxValues) + `"z":1}}}`
	other := `{"jsonrpc":"2.0","id":"p","method":"ping","params":{"pad":"` + strings.Repeat("z", maxOtherBytes) + `"}}`
	a, b := `{"jsonrpc":"2.0","method":"a"}`, `{"jsonrpc":"2.0","id":2,"method":"b"}`
	in := strings.Join([]string{a, long, wide, b, other, "hello", `{"jsonrpc":"2.0"}`, `{"id":4,"method":"c"}`,
		`{"jsonrpc":"2.0","method":"n","params":`, `{"jsonrpc":"2.0","id":{},"method":"d"}`, "", long}, "\n") // the last one cut by the end of input
	var refused []string
	r := &lineReader{src: bufio.NewReaderSize(strings.NewReader(in), 16), limits: messageLimits{callBytes: 100 << 10}}
	r.refuse = func(id []byte, code int, why string, size int64) {
		refused = append(refused, fmt.Sprintf("%s %d %s", id, code, why))
	}
	out, err := io.ReadAll(r)
	if err != nil || string(out) != a+"\n"+b+"\n\n" {
		t.Errorf("read %q, %v", out, err)
	}
	want := []string{"9 -32600 a tool call of", "10 -32600 message refused: a message holds at most 10000 values", `"p" -32600 a ping message of `,
		"null -32700 not JSON", "null -32600 not a JSON-RPC message: a request names", `4 -32600 not a JSON-RPC message: "jsonrpc"`,
		"null -32700 not JSON", `null -32600 not a JSON-RPC message: "id" must be`, "9 -32600 a tool call of"}
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
//	go test -run '^$' -bench BenchmarkLineChecks ./mcpserver
func BenchmarkLineChecks(b *testing.B) {
	l := messageLimits{callBytes: DefaultMaxCallBytes}
	for name, line := range map[string][]byte{
		"small": []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}` + "\n"),
		"900KB": []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + strings.Repeat("echo hi; ", 100000) + `"}}}` + "\n"),
	} {
		b.Run(name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				l.scanner().Feed(line)
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
