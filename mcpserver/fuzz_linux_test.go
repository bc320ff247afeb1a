package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzToolArguments calls each tool with arbitrary JSON as its arguments, through the real server over
// in-memory transports: every call must come back (a result, an error result or a protocol error),
// never hang or crash, and the session must keep serving. A command is always replaced by `true`:
// fuzzing must never run random shell code.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []string{
		`{"command": "x", "timeout": 1}`,
		`{"command": "x", "timeout": null, "run_in_background": true, "description": "d"}`,
		`{"command": 5}`, `{"timeout": -1, "command": "x"}`, `{"command": "x", "timeout": 1e99}`,
		`{"task_id": "t-0000000000000000", "block": true, "timeout": 1}`,
		`{"task_id": ["a"], "block": "yes"}`, `[1, 2]`, `null`, `"str"`, `{"extra": {"deep": [null]}}`,
	} {
		for tool := range uint8(4) {
			f.Add(tool, []byte(seed))
		}
	}
	_, cs := connect(f)
	tools := []string{"bash", "task_output", "task_stop", "task_list"}
	f.Fuzz(func(t *testing.T, tool uint8, raw []byte) {
		var args any
		if json.Unmarshal(raw, &args) != nil {
			return // not JSON: the client could not send it
		}
		if m, ok := args.(map[string]any); ok {
			if _, has := m["command"]; has {
				if _, isString := m["command"].(string); isString {
					m["command"] = "true"
				}
			}
			if _, has := m["timeout"]; has && tools[tool%4] == "task_output" {
				m["timeout"] = 1 // a block on a real task must not hold the fuzzer
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs.CallTool(ctx, &mcp.CallToolParams{Name: tools[tool%4], Arguments: args})
		if ctx.Err() != nil {
			t.Fatalf("%s with %s did not come back", tools[tool%4], raw)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("after %s with %s the session no longer serves: %v %v", tools[tool%4], raw, err, res)
		}
	})
}
