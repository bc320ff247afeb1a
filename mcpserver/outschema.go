package mcpserver

import (
	"context"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputSchemas holds the output schemas of one MCP server's tools and adds them to its tools/list
// results. The tools are registered without them (see addTool): given one, the SDK resolves it for
// validating results against it, which reaper's results never go through (structured hands the SDK
// no output value), and that resolution was half of New's time, on the path of every stdio start.
// Nothing is lost by it: the schemas are inferred once, at the first tools/list, and every list
// carries them as before.
type outputSchemas struct {
	infer map[string]func() *jsonschema.Schema // by tool name; filled by addTool before serving
	get   func() map[string]*jsonschema.Schema // the inferred schemas, once
}

func newOutputSchemas() *outputSchemas {
	o := &outputSchemas{infer: make(map[string]func() *jsonschema.Schema)}
	o.get = sync.OnceValue(func() map[string]*jsonschema.Schema {
		m := make(map[string]*jsonschema.Schema, len(o.infer))
		for name, infer := range o.infer {
			m[name] = infer()
		}
		return m
	})
	return o
}

// addTool adds t to srv with h, as mcp.AddTool does, with In's schema as its input schema (see
// schemaFor), and out as its output schema's inference, which o advertises. t's schemas must be nil.
func addTool[In any](srv *mcp.Server, o *outputSchemas, t *mcp.Tool, out func() *jsonschema.Schema, h mcp.ToolHandlerFor[In, any]) {
	if t.InputSchema != nil || t.OutputSchema != nil {
		panic("mcpserver: tool " + t.Name + ": its schemas come from addTool, not the tool")
	}
	t.InputSchema = schemaFor[In]()
	o.infer[t.Name] = out
	mcp.AddTool(srv, t, h)
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
		schemas := o.get()
		withSchemas := *list
		withSchemas.Tools = make([]*mcp.Tool, len(list.Tools))
		for i, t := range list.Tools {
			if s := schemas[t.Name]; s != nil && t.OutputSchema == nil {
				c := *t
				c.OutputSchema = s
				t = &c
			}
			withSchemas.Tools[i] = t
		}
		return &withSchemas, nil
	}
}
