package mcpserver

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestLineReaderRefuses(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"tools/call","params":{"c":"` + strings.Repeat("y", 100<<10) + `"},"id":9}`
	wide := `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{` + strings.Repeat(`"k":0,`, maxValues) + `"z":1}}}`
	other := `{"jsonrpc":"2.0","id":"p","method":"ping","params":{"pad":"` + strings.Repeat("z", maxOtherBytes) + `"}}`
	in := "{\"a\":1}\n" + long + "\n" + wide + "\n{\"b\":2}\n" + other + "\n" + long // the last one cut by the end of input
	var refused []string
	r := &lineReader{src: bufio.NewReaderSize(strings.NewReader(in), 16), limits: messageLimits{callBytes: 100 << 10}}
	r.refuse = func(id []byte, why string, size int64) {
		refused = append(refused, string(id)+": "+why)
	}
	out, err := io.ReadAll(r)
	if err != nil || string(out) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("read %q, %v", out, err)
	}
	want := []string{"9: a tool call of", "10: message refused: a message holds at most 10000 values", `"p": a ping message of `, "9: a tool call of"}
	if len(refused) != len(want) {
		t.Fatalf("refused %q, want %d", refused, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(refused[i], w) {
			t.Errorf("refusal %d: %q, want it to begin %q", i, refused[i], w)
		}
	}
}
