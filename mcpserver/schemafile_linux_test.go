package mcpserver

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

var update = flag.Bool("update", false, "write the schema files (schemas/*.json) from the Go types")

// schemaType is a type whose schema a tool advertises, and the inference of that schema.
type schemaType struct {
	name  string
	infer func() *jsonschema.Schema
	input bool // a tool's arguments: validated against its schema
}

func typeOf[T any](input bool) schemaType {
	return schemaType{name: reflect.TypeFor[T]().Name(), infer: schemaFor[T], input: input}
}

// schemaTypes are the types of every tool's arguments and results, of both protocol eras.
var schemaTypes = []schemaType{
	typeOf[BashInput](true), typeOf[TaskOutputInput](true), typeOf[TaskStopInput](true),
	typeOf[TaskListInput](true), typeOf[WriteStdinInput](true),
	typeOf[WorkspaceBashInput](true), typeOf[WorkspaceTaskOutputInput](true), typeOf[WorkspaceTaskStopInput](true),
	typeOf[WorkspaceTaskListInput](true), typeOf[WorkspaceWriteStdinInput](true),
	typeOf[WorkspaceInput](true), typeOf[WorkspaceOpenInput](true),
	typeOf[BashOutput](false), typeOf[TaskOutput](false), typeOf[TaskStopOutput](false),
	typeOf[TaskListOutput](false), typeOf[WriteStdinOutput](false),
	typeOf[WorkspaceOpenOutput](false), typeOf[WorkspaceCloseOutput](false), typeOf[WorkspaceListOutput](false),
}

// TestSchemaFiles checks that every schema file holds what the inference makes of its Go type
// today, that no file is left of a type no tool uses, and that every input schema resolves (the
// tools resolve theirs at their first call). With -update it writes the files instead.
func TestSchemaFiles(t *testing.T) {
	want := map[string][]byte{}
	for _, st := range schemaTypes {
		s := st.infer()
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		want[st.name+".json"] = append(b, '\n')
		if !st.input {
			continue
		}
		if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
			t.Errorf("%s: the schema does not resolve: %v", st.name, err)
		}
	}
	if *update {
		if err := os.RemoveAll("schemas"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir("schemas", 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join("schemas", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	const fix = "run go test ./mcpserver -run TestSchemaFiles -update"
	files, err := fs.Glob(schemaFiles, "schemas/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if want[filepath.Base(f)] == nil {
			t.Errorf("%s is the schema of no tool's type: %s", f, fix)
		}
	}
	for name, b := range want {
		got, err := schemaFiles.ReadFile("schemas/" + name)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("schemas/%s is not the schema of its Go type (%v): %s", name, err, fix)
		}
	}
}
