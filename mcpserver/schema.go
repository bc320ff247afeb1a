package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// schemaFor returns the JSON schema of T that the tools advertise and validate against: the one the
// SDK would infer (properties, descriptions, required fields: those without omitempty), with every
// "type" a single string. The inference gives pointers and
// slices the type ["null", X], which some clients cannot read (one never offers an argument typed so)
// and others' validators warn about. Results never hold null (reaper omits what is unset and sends
// empty lists as []), and a null argument counts as absent (see dropNullArguments), so X alone says
// what is meant. A type the inference refuses is a programming error: schemaFor panics.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tool schema: %v", err))
	}
	singleTypes(s)
	return s
}

// singleTypes replaces, in s and every schema below it, a type list of one type and "null" by that
// type alone.
func singleTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" }); len(s.Types) > 0 && len(types) == 1 {
		s.Type, s.Types = types[0], nil
	}
	for _, sub := range []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.Not, s.Contains, s.UnevaluatedItems, s.UnevaluatedProperties} {
		singleTypes(sub)
	}
	for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			singleTypes(sub)
		}
	}
	for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.Defs, s.Definitions} {
		for _, sub := range m {
			singleTypes(sub)
		}
	}
}

// dropNullArguments is middleware that removes arguments whose value is null from tool calls
// before they are validated (see addTool): some clients send null for an optional argument they
// leave unset, which the schemas (single types, no null) would refuse. A required argument sent as
// null is then missing, and refused as such.
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
