package sdkfix

import (
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// SchemaFor returns the JSON schema of T that a tool advertises and validates against: the one the
// SDK would infer (jsonschema.For: properties, descriptions, required fields, those without
// omitempty), with every "type" a single string. What the inference does: it gives every pointer and
// slice the type ["null", X] (the SDK only strips it from a tool's top-level pointer type,
// modelcontextprotocol/go-sdk#338). Why reaper cannot live with it: some clients cannot read such a
// type (Gemini's function declarations refuse it; one client never offers an argument typed so) and
// others' validators warn about it. reaper's results never hold null, and it takes a null argument
// as absent (mcpserver's dropNullArguments), so X alone says what is meant. Waits for: an inference
// option that leaves null out (google/jsonschema-go#63, open; #2 was withdrawn in favour of the SDK's
// top-level fix); delete singleTypes when it lands. A type the inference refuses is a programming
// error: SchemaFor panics.
func SchemaFor[T any]() *jsonschema.Schema {
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
