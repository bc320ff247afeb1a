package mcpserver

import (
	"embed"
	"encoding/json"
	"reflect"
)

// The JSON schemas of the tools' arguments and results, as tools/list advertises them, are files
// (schemas/<Go type>.json) made from the Go types by the inference schemaFor does: inferring them
// and encoding the schemas cost a stdio server's start, or its first tools/list, most of a
// millisecond, for the same bytes every time. The Go types stay the one source of truth: a test
// (TestSchemaFiles) infers every schema again and fails where a file differs, and
// `go test ./mcpserver -run TestSchemaFiles -update` writes them.
//
//go:embed schemas
var schemaFiles embed.FS

// schemaFile returns T's schema as its file holds it. A type without a file is a programming error:
// schemaFile panics, at registration.
func schemaFile[T any]() json.RawMessage {
	name := reflect.TypeFor[T]().Name()
	b, err := schemaFiles.ReadFile("schemas/" + name + ".json")
	if err != nil {
		panic("mcpserver: no schema file for " + name + ": add the type to schemaTypes (schemafile_linux_test.go) and run go test ./mcpserver -run TestSchemaFiles -update")
	}
	return b
}
