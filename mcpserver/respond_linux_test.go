package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResponseLine: a response with a result comes out of responseLine as the SDK encodes it, byte
// for byte, whatever its id and its result hold; an error or a response without a result is left to
// the SDK.
func TestResponseLine(t *testing.T) {
	weird := `"<a href=\"x\">&amp;</a>\t\u2028 é 漢 \ud83d\ude00 \\"`
	results := []string{`{}`, `{"content":[{"type":"text","text":` + weird + `}]}`, `null`, `"` + strings.Repeat("~", 1<<20) + `"`}
	ids := []any{int64(0), int64(-7), int64(1) << 53, "", "s-1", "<&>", "é\"\\"}
	for _, idv := range ids {
		id, err := jsonrpc.MakeID(asDecoded(idv))
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range results {
			resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(res)}
			want, err := jsonrpc.EncodeMessage(resp)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := responseLine(resp)
			if !ok || string(got) != string(want)+"\n" {
				t.Errorf("id %v, result %.40q: responseLine = %.120q (%v), the SDK writes %.120q", idv, res, got, ok, want)
			}
		}
	}
	id, _ := jsonrpc.MakeID(float64(1))
	for _, resp := range []*jsonrpc.Response{
		{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}},
		{ID: id, Result: json.RawMessage(`{}`), Error: errors.New("both")},
		{ID: id},
		{Result: json.RawMessage(`{}`)},
	} {
		if line, ok := responseLine(resp); ok {
			t.Errorf("responseLine wrote %q for %+v, which the SDK must write", line, resp)
		}
	}
}

// asDecoded is an id as JSON decoding gives it, which is what jsonrpc.MakeID takes.
func asDecoded(v any) any {
	if n, ok := v.(int64); ok {
		return float64(n)
	}
	return v
}

// TestStdioBatch: a batch that comes in over stdio (protocols before 2025-06-18 allow them) is
// answered as one message, an array of its responses, as the SDK's connection answers it; a
// message that is not part of a batch before it is answered on a line of its own.
func TestStdioBatch(t *testing.T) {
	s := newTestServer(t, Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, s.StdioTransport(inR, outW)) }()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the server did not end")
		}
		outR.Close()
	})
	lines := bufio.NewReader(outR)
	send := func(msg string) string {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	init := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.HasPrefix(init, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Fatalf("initialize answered %q", init)
	}
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); got != `{"jsonrpc":"2.0","id":2,"result":{}}`+"\n" {
		t.Errorf("ping answered %q", got)
	}
	got := send(`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":"four","method":"ping"}]`)
	var batch []map[string]any
	if err := json.Unmarshal([]byte(got), &batch); err != nil || len(batch) != 2 {
		t.Fatalf("the batch was answered with %q (%v), want an array of two responses", got, err)
	}
}

var _ mcp.Connection = (*responseConn)(nil)
