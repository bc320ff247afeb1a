package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

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
