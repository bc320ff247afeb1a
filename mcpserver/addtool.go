package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool adds t to srv with h, as mcp.AddTool does (schemas from sdkfix.SchemaFor, arguments
// validated and decoded into an In, h's output as the structured content, h's error as a tool error
// unless a *jsonrpc.Error), but (see sdkfix's package doc) the output is not marshalled, parsed back
// and checked against the output schema (TestResultsMatchOutputSchemas checks every tool's instead);
// each check in before runs ahead of the validation, and its error is the call's result (see
// needsWorkspace); and a refusal of the arguments says what the tool takes. t's schemas must be nil.
func addTool[In, Out any](srv *mcp.Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error), before ...func(tool string, args json.RawMessage) error) {
	if t.InputSchema != nil || t.OutputSchema != nil {
		panic("mcpserver: tool " + t.Name + ": its schemas come from addTool, not the tool")
	}
	in := sdkfix.SchemaFor[In]()
	t.InputSchema, t.OutputSchema = in, sdkfix.SchemaFor[Out]()
	validator, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: input schema: %v", t.Name, err))
	}
	takes := argumentsText(t.Name, in)
	srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, check := range before {
			if err := check(t.Name, req.Params.Arguments); err != nil {
				return toolError(err), nil
			}
		}
		in, err := decodeArguments[In](req.Params.Arguments, validator)
		if err != nil {
			return toolError(fmt.Errorf("%w; %s", err, takes)), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return toolError(err), nil
		}
		if res == nil {
			return &mcp.CallToolResult{}, nil
		}
		res.StructuredContent = out
		return res, nil
	})
}

// decodeArguments validates a tool call's arguments against schema, as the SDK does (absent
// arguments are the empty object), and decodes them into an In. The schemas refuse properties they
// do not name, so the decoding's matching of names regardless of case finds only exact ones.
func decodeArguments[In any](args json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	v := map[string]any{}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return in, fmt.Errorf("validating \"arguments\": unmarshaling arguments: %w", err)
		}
	}
	if err := schema.Validate(v); err != nil {
		return in, fmt.Errorf("validating \"arguments\": %w", err)
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return in, err
		}
	}
	return in, nil
}

// argumentsText says, after an argument's refusal, what the tool name takes: the arguments of its
// input schema, the required ones first.
func argumentsText(name string, s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return name + " takes no arguments"
	}
	var required, optional []string
	for _, a := range slices.Sorted(maps.Keys(s.Properties)) {
		if slices.Contains(s.Required, a) {
			required = append(required, a+" (required)")
		} else {
			optional = append(optional, a)
		}
	}
	return fmt.Sprintf("%s takes %s; its input schema gives their types and meaning", name, strings.Join(append(required, optional...), ", "))
}

func toolError(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

// dropNullArguments is middleware that removes null arguments from tool calls before they are
// validated: some clients send null for an optional argument they leave unset, which the schemas
// (no null: sdkfix.SchemaFor) would refuse. A required argument sent as null is then missing.
func dropNullArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && bytes.Contains(call.Params.Arguments, []byte("null")) {
			var args map[string]json.RawMessage
			if json.Unmarshal(call.Params.Arguments, &args) == nil && args != nil {
				for k, v := range args {
					if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
						delete(args, k)
					}
				}
				if b, err := json.Marshal(args); err == nil {
					call.Params.Arguments = b
				}
			}
		}
		return next(ctx, method, req)
	}
}
