package mcpserver

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/httpguard"
	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSlowBodyCutLongCallKept: behind httpguard's bounds, an unauthenticated request whose body never
// ends loses its connection within the body's bound, while a tool call that runs 30 s, thirty times
// that bound, completes over its own connection: the bound is lifted once a body has been read, and
// never cancels a running call.
func TestSlowBodyCutLongCallKept(t *testing.T) {
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, Grace: new(200 * time.Millisecond), WorkDir: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	srv, err := New(Options{Reaper: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpguard.NewServer(srv.HTTPHandler(HTTPOptions{Tokens: map[string]string{"tok-alice": "alice"}}), httpguard.Options{BodyTimeout: time.Second})
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "http://" + ln.Addr().String() + "/mcp"

	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Token: "tok-alice"})
	type result struct {
		res  *mcp.CallToolResult
		err  error
		took time.Duration
	}
	long := make(chan result, 1)
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 30; echo done", "timeout": 120000}})
		long <- result{res, err, time.Since(start)}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+ln.Addr().String()+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	go func() {
		for range 600 {
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a body that never ends held its connection for 20 s: %q", b)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a body that never ends held its connection for %v", took)
	} else {
		t.Logf("the slow body's connection was closed after %v", took.Round(time.Millisecond))
	}

	select {
	case res := <-long:
		if res.err != nil || res.res.IsError || !strings.Contains(res.res.Content[0].(*mcp.TextContent).Text, "done") || res.took < 30*time.Second {
			text := ""
			if res.res != nil && len(res.res.Content) > 0 {
				text = res.res.Content[0].(*mcp.TextContent).Text
			}
			t.Errorf("the long call: %q, %v after %v", text, res.err, res.took)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the 30 s call did not return within 2 minutes")
	}
}
