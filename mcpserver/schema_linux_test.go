package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolSchemasArePortable lists the tools of both protocol eras as a client does and checks that
// their schemas are portable (mcptest.CheckPortableSchemas).
func TestToolSchemasArePortable(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
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

// TestResultsMatchOutputSchemas calls every tool of both protocol eras, as a client does, and
// validates each structured result against the output schema that tools/list advertised for the
// tool: the SDK does not check the results against it (see addTool), and a client that validates
// results must find them true.
func TestResultsMatchOutputSchemas(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	schemas := func(cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
		t.Helper()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := make(map[string]*jsonschema.Resolved)
		for _, tool := range res.Tools {
			b, err := json.Marshal(tool.OutputSchema)
			if err != nil {
				t.Fatal(err)
			}
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("%s: output schema %s: %v", tool.Name, b, err)
			}
			if m[tool.Name], err = s.Resolve(nil); err != nil {
				t.Fatalf("%s: output schema %s: %v", tool.Name, b, err)
			}
		}
		return m
	}
	called := map[string]bool{}
	check := func(c mcptest.Caller, schemas map[string]*jsonschema.Resolved, tool string, args map[string]any) map[string]any {
		t.Helper()
		res := mcptest.Call(t, c, tool, args)
		if res.IsError {
			t.Fatalf("%s(%v): %s", tool, args, mcptest.Text(res))
		}
		var out map[string]any
		mcptest.Decode(t, res, &out)
		if err := schemas[tool].Validate(out); err != nil {
			t.Errorf("%s(%v): the result does not match the advertised output schema: %v\n%v", tool, args, err, out)
		}
		called[tool] = true
		return out
	}

	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{})
	sessions := schemas(cs)
	check(cs, sessions, "bash", map[string]any{"command": "echo hi; cd /"})
	task := check(cs, sessions, "bash", map[string]any{"command": "cat", "run_in_background": true, "stdin": true})["task_id"]
	check(cs, sessions, "write_stdin", map[string]any{"task_id": task, "chars": "typed\n", "wait_ms": 100})
	check(cs, sessions, "task_list", map[string]any{})
	check(cs, sessions, "task_stop", map[string]any{"task_id": task})
	check(cs, sessions, "task_output", map[string]any{"task_id": task})
	for tool := range sessions {
		if !called[tool] {
			t.Errorf("%s: not called over 2025-11-25", tool)
		}
	}

	clear(called)
	ws := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	workspaces := schemas(ws)
	handle := check(ws, workspaces, "workspace_open", map[string]any{})["workspace"]
	in := func(args map[string]any) map[string]any { args["workspace"] = handle; return args }
	check(ws, workspaces, "bash", in(map[string]any{"command": "echo hi"}))
	task = check(ws, workspaces, "bash", in(map[string]any{"command": "cat", "run_in_background": true, "stdin": true}))["task_id"]
	check(ws, workspaces, "write_stdin", in(map[string]any{"task_id": task, "chars": "typed\n", "wait_ms": 100}))
	check(ws, workspaces, "task_list", in(map[string]any{}))
	check(ws, workspaces, "task_stop", in(map[string]any{"task_id": task}))
	check(ws, workspaces, "task_output", in(map[string]any{"task_id": task}))
	check(ws, workspaces, "workspace_list", map[string]any{})
	check(ws, workspaces, "workspace_close", in(map[string]any{}))
	for tool := range workspaces {
		if !called[tool] {
			t.Errorf("%s: not called over 2026-07-28", tool)
		}
	}
}
