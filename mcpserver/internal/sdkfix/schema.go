package sdkfix

import (
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// SchemaFor returns the JSON schema of T that a tool advertises and validates against: the one the
// SDK would infer (jsonschema.For), with every "type" a single string. The inference types every
// pointer and slice ["null", X], which some clients cannot read (Gemini refuses it) and others' validators
// warn about; reaper's results never hold null, and it takes a null argument as absent. Waits for: an
// inference option that leaves null out (google/jsonschema-go#63, open); delete singleTypes when it
// lands. A type the inference refuses is a programming error: SchemaFor panics.
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
