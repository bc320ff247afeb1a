package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUnauthorizedCarriesChallenge checks the 401s of a server with tokens: each carries a Bearer
// challenge (RFC 6750), with error="invalid_token" only when a bearer token was presented; and a
// client with a good token still gets the streamed answers the challenge wrapper must not break.
func TestUnauthorizedCarriesChallenge(t *testing.T) {
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
	hs := httptest.NewServer(srv.HTTPHandler(HTTPOptions{Tokens: map[string]string{"tok-alice": "alice"}}))
	t.Cleanup(hs.Close)

	for _, tc := range []struct {
		authorization string
		want          string
	}{
		{"", `Bearer realm="reaper"`},
		{"Basic YWxpY2U6cHc=", `Bearer realm="reaper"`},
		{"Bearer tok-mallory", `Bearer realm="reaper", error="invalid_token", error_description="the bearer token is not one this server accepts"`},
		{"bearer tok-mallory", `Bearer realm="reaper", error="invalid_token", error_description="the bearer token is not one this server accepts"`},
	} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.authorization != "" {
			req.Header.Set("Authorization", tc.authorization)
		}
		resp, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || len(got) != 1 || got[0] != tc.want {
			t.Errorf("Authorization %q: %s, WWW-Authenticate %q; want 401 and %q", tc.authorization, resp.Status, got, tc.want)
		}
	}

	cs := mcptest.ConnectHTTP(t, hs.URL, mcptest.Options{Token: "tok-alice"})
	res := mcptest.CallInto(t, cs, "bash", map[string]any{"command": "echo in"}, nil)
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.HasPrefix(text, "in\n") {
		t.Errorf("a call with a good token: error=%v %q", res.IsError, text)
	}
}
