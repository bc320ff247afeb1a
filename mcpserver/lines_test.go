package mcpserver

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestIDScanner(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct{ name, msg, want string }{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"command":"` + big + `"}}`, `7`},
		{"id last", `{"method":"tools/call","params":{"arguments":{"id":3,"command":"` + big + `"}},"jsonrpc":"2.0","id":"abc"}`, `"abc"`},
		{"nested id only", `{"method":"x","params":{"id":3,"s":"` + big + `"}}`, ``},
		{"escaped quotes", `{"params":{"a":"\"id\":5,"},"id" : 12 }`, `12`},
		{"key that starts with id", `{"idx":1,"id":2}`, `2`},
		{"string value id", `{"method":"id","id":4}`, `4`},
		{"object id", `{"id":{"a":1},"method":"m"}`, ``},
		{"null id", `{"id":null}`, ``},
		{"batch", `[{"id":1},{"id":2}]`, ``},
		{"garbage", big, ``},
	} {
		var s idScanner
		for b := []byte(tc.msg); len(b) > 0; { // in uneven pieces, as reads come
			n := min(len(b), 7777)
			s.feed(b[:n])
			b = b[n:]
		}
		if string(s.id) != tc.want {
			t.Errorf("%s: id %q, want %q", tc.name, s.id, tc.want)
		}
	}
}

func TestLineReaderRefusesLongLines(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"tools/call","params":{"c":"` + strings.Repeat("y", 300) + `"},"id":9}`
	in := "{\"a\":1}\n" + long + "\n{\"b\":2}\n" + long // the last one cut by the end of input
	var refused []string
	r := &lineReader{src: bufio.NewReaderSize(strings.NewReader(in), 16), limit: 100}
	r.refuse = func(size int64, id json.RawMessage) {
		if size != int64(len(long)+1) && size != int64(len(long)) {
			t.Errorf("refused a line of %d bytes, want %d", size, len(long)+1)
		}
		refused = append(refused, string(id))
	}
	out, err := io.ReadAll(r)
	if err != nil || string(out) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("read %q, %v", out, err)
	}
	if len(refused) != 2 || refused[0] != "9" || refused[1] != "9" {
		t.Errorf("refused %v, want the id 9 twice", refused)
	}
}
