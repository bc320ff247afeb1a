package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// served is what one protocol era of the binary offers a client: its tools with their arguments,
// and everything its tools/list result and its instructions say, as the client decoded it.
type served struct {
	era    string
	tools  map[string][]string // tool name → argument names
	fields map[string]bool     // every property of every tool's results, at any depth
	list   any                 // the tools/list result and the instructions, decoded from JSON
}

// serveOf lists what a client gets from cs.
func serveOf(t *testing.T, era string, cs *mcp.ClientSession) served {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", era, err)
	}
	s := served{era: era, tools: map[string][]string{}, fields: map[string]bool{}}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.OutputSchema)
		var out any
		json.Unmarshal(b, &out)
		walkProperties(out, s.fields)
		b, _ = json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatalf("%s: %s's input schema: %v", era, tool.Name, err)
		}
		s.tools[tool.Name] = slices.Sorted(maps.Keys(schema.Properties))
	}
	b, err := json.Marshal(map[string]any{"tools/list": res, "instructions": cs.InitializeResult().Instructions})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s.list); err != nil {
		t.Fatal(err)
	}
	return s
}

// servedEras starts the binary over stdio and over HTTP and lists what each era serves: a session
// over stdio (at the go-sdk client's default revision, 2026-07-28: the connection is the session) and
// over HTTP at 2025-11-25, and workspaces over HTTP at 2026-07-28. Nothing runs a command, so no
// session is made: process containment will do.
func servedEras(t *testing.T) (session, workspace []served) {
	t.Helper()
	stdio := exec.Command(bin, "serve", "--containment", "process", "--state-dir", t.TempDir())
	stdio.Stderr = &testutil.Buffer{}
	session = append(session, serveOf(t, "stdio", mcptest.ConnectCommand(t, stdio, mcptest.Options{})))

	const token = "docs-tools-token"
	url := startHTTP(t, token)
	session = append(session, serveOf(t, "HTTP "+mcptest.Sessions, mcptest.ConnectHTTP(t, url, mcptest.Options{Token: token})))
	workspace = append(workspace, serveOf(t, "HTTP "+mcptest.Workspaces, mcptest.ConnectHTTP(t, url, mcptest.Options{Token: token, Protocol: mcptest.Workspaces})))
	return session, workspace
}

// startHTTP starts `reaper serve --http 127.0.0.1:0` with token as its only one, in process
// containment, and returns its endpoint once it serves; cleanup stops it with SIGTERM.
func startHTTP(t *testing.T, token string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--containment", "process", "--state-dir", t.TempDir())
	cmd.Env = append(cmd.Environ(), "REAPER_TOKEN="+token)
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("reaper serve did not exit within 30 s of SIGTERM:\n%s", stderr)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if line, ok := testutil.LogLine(stderr.String(), testutil.ServingHTTP); ok {
			return line["url"]
		}
		select {
		case <-done:
			t.Fatalf("reaper serve exited before it served:\n%s", stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaper serve has not served after a minute:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestToolsAsServed checks what the binary serves in each era against docs/tools.md, both ways:
// every tool and argument served is documented, and every documented one is served; and that every
// document names only tools, arguments and result fields that are served. It also checks
// that every string of every tools/list result, and of the instructions, is printable text: a
// control byte in a description (the escape a model is told to send, made the byte by the struct
// tag's unquoting) is a character the model never sees, or one that acts on a terminal that prints
// it. Newlines are text.
func TestToolsAsServed(t *testing.T) {
	sessionEras, workspaceEras := servedEras(t)
	doc := read(t, "docs/tools.md")
	inSession := toolTable(t, doc, "## In a session", nil)
	inWorkspace := toolTable(t, doc, "## In a workspace", inSession)
	for _, s := range append(sessionEras, workspaceEras...) {
		walkStrings(s.list, "", func(path, v string) {
			if i := strings.IndexFunc(v, func(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f }); i >= 0 {
				t.Errorf("%s: %s holds the control byte %#x at %d: %q", s.era, path, v[i], i, v[max(i-40, 0):min(i+40, len(v))])
			}
		})
	}
	for _, s := range sessionEras {
		compareTools(t, s, inSession, "docs/tools.md's table under \"## In a session\"")
	}
	for _, s := range workspaceEras {
		compareTools(t, s, inWorkspace, "docs/tools.md's table under \"## In a workspace\"")
	}
	namesServed(t, append(sessionEras, workspaceEras...))
}

// toolLike is a name in backquotes that reads as a tool's, or an argument or result field of one.
var toolLike = regexp.MustCompile("`((?:task|workspace|output)_[a-z_]+|write_stdin)`")

// namesServed checks that every name of a document that reads as a tool's (task_..., workspace_...,
// output_..., write_stdin in backquotes) is a tool, an argument or a result field that the binary
// serves in some era.
func namesServed(t *testing.T, eras []served) {
	t.Helper()
	known := map[string]bool{}
	for _, s := range eras {
		for tool, args := range s.tools {
			known[tool] = true
			for _, a := range args {
				known[a] = true
			}
		}
		for f := range s.fields {
			known[f] = true
		}
	}
	for _, doc := range documents(t) {
		for _, m := range toolLike.FindAllStringSubmatch(read(t, doc), -1) {
			if !known[m[1]] {
				t.Errorf("%s names %s, which no tool, argument or result field the binary serves is called", doc, m[1])
			}
		}
	}
}

// walkProperties adds the names of every property of a JSON schema, at any depth, to names.
func walkProperties(v any, names map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for k := range props {
				names[k] = true
			}
		}
		for _, x := range v {
			walkProperties(x, names)
		}
	case []any:
		for _, x := range v {
			walkProperties(x, names)
		}
	}
}

// compareTools reports every tool or argument served and not documented, and every one documented
// and not served.
func compareTools(t *testing.T, s served, documented map[string][]string, where string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		args, ok := documented[name]
		if !ok {
			t.Errorf("%s serves the tool %s, which %s does not document", s.era, name, where)
			continue
		}
		for _, a := range s.tools[name] {
			if !slices.Contains(args, a) {
				t.Errorf("%s: %s takes %s, which %s does not document", s.era, name, a, where)
			}
		}
		for _, a := range args {
			if !slices.Contains(s.tools[name], a) {
				t.Errorf("%s documents %s's argument %s, which %s does not serve", where, name, a, s.era)
			}
		}
	}
	for name := range documented {
		if _, ok := s.tools[name]; !ok {
			t.Errorf("%s documents the tool %s, which %s does not serve", where, name, s.era)
		}
	}
}

var (
	tableRow = regexp.MustCompile("(?m)^\\| ([^|\n]*) \\| ([^|\n]*) \\|")
	codeWord = regexp.MustCompile("`([a-z][a-z_]*)`")
)

// inheritArgs is what a row of the workspace table says for a tool whose arguments are a session's
// and more.
const inheritArgs = "the arguments they take in a session"

// toolTable returns the tools of the table that follows heading in doc, each with its arguments: the
// names in backquotes in the row's first cell are tools, in its second arguments ("none" for none). A
// row whose second cell says inheritArgs gives its tools their arguments in session as well.
func toolTable(t *testing.T, doc, heading string, session map[string][]string) map[string][]string {
	t.Helper()
	at := strings.Index(doc, "\n"+heading)
	if at < 0 {
		t.Fatalf("docs/tools.md has no heading %q", heading)
	}
	section := doc[at+1:]
	if next := strings.Index(section[len(heading):], "\n## "); next >= 0 {
		section = section[:len(heading)+next]
	}
	out := map[string][]string{}
	for _, row := range tableRow.FindAllStringSubmatch(section, -1) {
		if row[1] == "Tool" || strings.HasPrefix(row[1], "---") {
			continue
		}
		var args []string
		for _, m := range codeWord.FindAllStringSubmatch(row[2], -1) {
			args = append(args, m[1])
		}
		for _, m := range codeWord.FindAllStringSubmatch(row[1], -1) {
			tool := m[1]
			out[tool] = slices.Clone(args)
			if strings.Contains(row[2], inheritArgs) {
				if _, ok := session[tool]; !ok {
					t.Errorf("docs/tools.md, %s: %s takes %q, but the session's table has no %s", heading, tool, inheritArgs, tool)
				}
				out[tool] = append(out[tool], session[tool]...)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/tools.md has no table of tools under %q", heading)
	}
	return out
}

// walkStrings calls f with every string in v (keys included), and where it is.
func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case map[string]any:
		for k, x := range v {
			f(path+"/"+k+" (a key)", k)
			walkStrings(x, path+"/"+k, f)
		}
	case []any:
		for i, x := range v {
			walkStrings(x, fmt.Sprintf("%s/%d", path, i), f)
		}
	}
}
