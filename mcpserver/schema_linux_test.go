package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolSchemasArePortable lists the tools of both protocol eras as a client does and checks that
// their schemas are portable (mcptest.CheckPortableSchemas).
func TestToolSchemasArePortable(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{})
	res, err := mcptest.ConnectHTTP(t, url, mcptest.Options{}).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 5 {
		t.Errorf("%d tools listed, want 5", len(res.Tools))
	}
	ws, err := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces}).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Tools) != 8 {
		t.Errorf("%d tools listed to a client of 2026-07-28, want 8", len(ws.Tools))
	}
	for _, tool := range append(res.Tools, ws.Tools...) {
		mcptest.CheckPortableSchemas(t, tool)
	}
}

// TestToolSchemasKeepValidation checks that the portable schemas still say which arguments are
// required and still refuse wrong types, and that an optional argument sent as null means its
// default (as a client that fills unset arguments with null expects).
func TestToolSchemasKeepValidation(t *testing.T) {
	_, cs := connect(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"bash": {"command"}, "task_output": {"task_id"}, "task_stop": {"task_id"}, "task_list": nil, "write_stdin": {"task_id"}}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Type       string         `json:"type"`
			Required   []string       `json:"required"`
			Properties map[string]any `json:"properties"`
		}
		json.Unmarshal(b, &s)
		if s.Type != "object" || !slices.Equal(s.Required, want[tool.Name]) {
			t.Errorf("%s: input schema type %q, required %v; want object, %v", tool.Name, s.Type, s.Required, want[tool.Name])
		}
		if tool.Name == "bash" {
			if p, _ := s.Properties["timeout"].(map[string]any); p["type"] != "integer" || !strings.Contains(fmt.Sprint(p["description"]), "milliseconds") {
				t.Errorf("bash's timeout: %v", s.Properties["timeout"])
			}
		}
	}
	for _, tc := range []struct {
		args    map[string]any
		isError bool
		text    string
	}{
		{map[string]any{"command": "echo ok", "timeout": nil, "run_in_background": nil}, false, "ok\n"},
		{map[string]any{"command": "echo ok", "timeout": 5000}, false, "ok\n"},
		{map[string]any{"command": "echo '<null>' >/dev/null && echo ok", "timeout": nil}, false, "ok\n"},
		{map[string]any{"command": "echo ok", "timeout": "5000"}, true, "timeout"},
		{map[string]any{"command": "echo ok", "timeout": 1.5}, true, "timeout"},
		{map[string]any{"command": nil}, true, "command"},
		{map[string]any{"timeout": 5000}, true, "command"},
		{map[string]any{"command": "echo ok", "surprise": 1}, true, "surprise"},
	} {
		res := mcptest.CallInto(t, cs, "bash", tc.args, nil)
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError != tc.isError || !strings.Contains(text, tc.text) {
			t.Errorf("bash %v: error=%v %q; want error=%v and %q", tc.args, res.IsError, text, tc.isError, tc.text)
		}
	}
}
