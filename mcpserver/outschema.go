package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputSchemas holds the output schemas of one MCP server's tools and adds them to its tools/list
// results. The tools are registered without them (see addTool): given one, the SDK resolves it for
// validating results against it, which reaper's results never go through (structured hands the SDK
// no output value). Nothing is lost by it: every list carries them.
type outputSchemas struct {
	byTool map[string]json.RawMessage // filled by addTool before serving, read-only after
}

func newOutputSchemas() *outputSchemas {
	return &outputSchemas{byTool: make(map[string]json.RawMessage)}
}

// middleware is receiving middleware that gives every tool in a tools/list result its output schema.
// The tools in the SDK's result are the server's own: each is copied before it is changed.
func (o *outputSchemas) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcp.ListToolsResult)
		if !ok || err != nil {
			return res, err
		}
		withSchemas := *list
		withSchemas.Tools = make([]*mcp.Tool, len(list.Tools))
		for i, t := range list.Tools {
			if s := o.byTool[t.Name]; s != nil && t.OutputSchema == nil {
				c := *t
				c.OutputSchema = s
				t = &c
			}
			withSchemas.Tools[i] = t
		}
		return &withSchemas, nil
	}
}
