package mcptest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CheckPortableSchemas fails the test on a tool without an input or an output schema, and on any
// "type" that is not a single string anywhere in either: a type list such as ["null","integer"]
// makes one client drop the argument and others' validators warn.
func CheckPortableSchemas(t testing.TB, tool *mcp.Tool) {
	t.Helper()
	if tool.InputSchema == nil || tool.OutputSchema == nil {
		t.Errorf("%s: input schema %v, output schema %v", tool.Name, tool.InputSchema, tool.OutputSchema)
	}
	for kind, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
		b, err := json.Marshal(schema)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		checkSingleTypes(t, fmt.Sprintf("%s %s schema #", tool.Name, kind), v)
	}
}

// checkSingleTypes walks a JSON schema and reports every "type" that is not a string. Names under
// properties (and the like) are property names, not keywords: their values are schemas.
func checkSingleTypes(t testing.TB, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if typ, ok := v["type"]; ok {
			if _, ok := typ.(string); !ok {
				t.Errorf("%s: type %v is not a single type", path, typ)
			}
		}
		for k, sub := range v {
			switch k {
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
				m, _ := sub.(map[string]any)
				for name, s := range m {
					checkSingleTypes(t, path+"/"+k+"/"+name, s)
				}
			default:
				checkSingleTypes(t, path+"/"+k, sub)
			}
		}
	case []any:
		for i, s := range v {
			checkSingleTypes(t, fmt.Sprintf("%s/%d", path, i), s)
		}
	}
}
