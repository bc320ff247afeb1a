package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions a test client may speak.
const (
	// Sessions is the newest revision with initialize and, over HTTP, Mcp-Session-Id sessions.
	Sessions = "2025-11-25"
	// Workspaces is the first revision without sessions: over HTTP every request stands alone and
	// reaper's tools name a workspace handle.
	Workspaces = "2026-07-28"
)

// Options configures a connection. The zero value connects as a session: see Protocol.
type Options struct {
	// Protocol is the revision the client asks for. Empty means a session, in the newest revision
	// that gives one on the transport: over HTTP, Sessions (the go-sdk client's own default,
	// 2026-07-28, has no sessions there); over a connection of its own (stdio, in-memory), the
	// go-sdk client's default, which reaper negotiates (2026-07-28: the connection is the session).
	Protocol string
	// Token, if set, is sent as a bearer token over HTTP.
	Token string
	// HTTPClient, if set, carries the HTTP requests (with Token added to each).
	HTTPClient *http.Client
	// Client configures the client (its notification handlers, say); nil is the default.
	Client *mcp.ClientOptions
}

// connectTimeout bounds a connection's handshake.
const connectTimeout = 30 * time.Second

// callTimeout bounds a tool call: longer than any call a test makes (the tools' longest timeout is
// 10 minutes, which no test uses), short enough that a call that never returns fails the test.
const callTimeout = 2 * time.Minute

// Dial connects the go-sdk client over t at opts.Protocol (empty: the SDK's default), for processes
// that have no testing.T (a test binary run as a client that vanishes, say).
func Dial(ctx context.Context, t mcp.Transport, opts Options) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "reaper-test", Version: "1"}, opts.Client)
	return client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: opts.Protocol})
}

// DialHTTP connects the go-sdk client to the Streamable HTTP endpoint url (see Options.Protocol).
func DialHTTP(ctx context.Context, url string, opts Options) (*mcp.ClientSession, error) {
	if opts.Protocol == "" {
		opts.Protocol = Sessions
	}
	hc := opts.HTTPClient
	switch {
	case hc == nil:
		hc = HTTPClient(opts.Token)
	case opts.Token != "":
		with := *hc
		with.Transport = bearer{token: opts.Token, base: hc.Transport}
		hc = &with
	}
	return Dial(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, opts)
}

// Connect connects the go-sdk client over t and fails the test if it cannot; cleanup closes the
// session.
func Connect(t testing.TB, tr mcp.Transport, opts Options) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(connectTimeout))
	defer cancel()
	cs, err := Dial(ctx, tr, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// ConnectHTTP connects the go-sdk client to url and fails the test if it cannot; cleanup closes the
// session (over 2025-11-25 that sends DELETE).
func ConnectHTTP(t testing.TB, url string, opts Options) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(connectTimeout))
	defer cancel()
	cs, err := DialHTTP(ctx, url, opts)
	if err != nil {
		t.Fatalf("connect over HTTP to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// ConnectCommand starts cmd, which must serve MCP over its stdin and stdout, and connects the go-sdk
// client to it; it fails the test, showing cmd's stderr, if it cannot. Cleanup closes the session,
// which closes cmd's input and waits for it to exit (the SDK's CommandTransport sends SIGTERM after
// 5 s, SIGKILL after 5 more).
func ConnectCommand(t testing.TB, cmd *exec.Cmd, opts Options) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(connectTimeout))
	defer cancel()
	cs, err := Dial(ctx, &mcp.CommandTransport{Command: cmd}, opts)
	if err != nil {
		t.Fatalf("connect over stdio to %s: %v\n%s", cmd.Path, err, cmd.Stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// HTTPClient is an HTTP client that sends a bearer token, if token is set.
func HTTPClient(token string) *http.Client {
	if token == "" {
		return &http.Client{}
	}
	return &http.Client{Transport: bearer{token: token}}
}

// bearer adds a bearer token to every request it carries on base (nil: http.DefaultTransport).
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return b.base.RoundTrip(r)
}

// Caller calls tools: a *mcp.ClientSession, or a *Workspace.
type Caller interface {
	CallTool(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

// Call calls a tool with a deadline and returns its result, failing the test on a protocol error (a
// tool error is a result: the caller checks IsError).
func Call(t testing.TB, c Caller, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(callTimeout))
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%.200v): %v", tool, args, err)
	}
	return res
}

// CallInto is Call that also decodes the structured result into out, unless out is nil or the result
// is a tool error.
func CallInto(t testing.TB, c Caller, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := Call(t, c, tool, args)
	if out != nil && !res.IsError {
		Decode(t, res, out)
	}
	return res
}

// Decode decodes a result's structured content into v, failing the test if it cannot.
func Decode(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %.500s: %v", b, err)
	}
}

// Text returns a result's text content, all blocks together; "" for a nil result.
func Text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// BashResult is the bash tool's structured output, as a client reads it.
type BashResult struct {
	Output    string `json:"output"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed"`
	Cwd       string `json:"cwd"`
	Hits
	Notice           string `json:"notice"`
	TaskID           string `json:"task_id"`
	Input            string `json:"input"`
	Leftover         int    `json:"leftover_processes"`
	DroppedChars     int64  `json:"dropped_chars"`
	DroppedLines     int64  `json:"dropped_lines"`
	OutputBytes      int64  `json:"output_bytes"`
	OutputLines      int64  `json:"output_lines"`
	OutputFile       string `json:"output_file"`
	OutputTaskID     string `json:"output_task_id"`
	FileMissingBytes int64  `json:"file_missing_bytes"`
}

// OutputResult is task_output's structured output (and write_stdin's, with Written), as a client
// reads it.
type OutputResult struct {
	TaskID          string `json:"task_id"`
	Status          string `json:"status"`
	ExitCode        *int   `json:"exit_code"`
	WaitingForInput bool   `json:"waiting_for_input"`
	Output          string `json:"output"`
	Offset          int64  `json:"offset"`
	Next            int64  `json:"next"`
	PendingBytes    int64  `json:"pending_bytes"`
	Lines           int    `json:"lines"`
	OutputBytes     int64  `json:"output_bytes"`
	OutputFile      string `json:"output_file"`
	Input           string `json:"input"`
	Processes       int    `json:"processes"`
	Written         int    `json:"written"`
	Hits
}

// Hits are the session's limits a command or task ran into, as its result counts them.
type Hits struct {
	ForksRefused        int64   `json:"forks_refused"`
	CPUThrottledPeriods int64   `json:"cpu_throttled_periods"`
	CPUThrottledSeconds float64 `json:"cpu_throttled_seconds"`
}

// WriteStdin types chars into a task's input (with the extra arguments given as name, value pairs),
// fails the test on a tool error and returns the decoded result.
func WriteStdin(t testing.TB, c Caller, id, chars string, extra ...any) OutputResult {
	t.Helper()
	args := map[string]any{"task_id": id, "chars": chars}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	res := Call(t, c, "write_stdin", args)
	if res.IsError {
		t.Fatalf("write_stdin %s %q: tool error: %s", id, chars, Text(res))
	}
	var out OutputResult
	Decode(t, res, &out)
	return out
}

// Bash runs command, with the extra arguments given as name, value pairs, fails the test on a tool
// error and returns the decoded result.
func Bash(t testing.TB, c Caller, command string, extra ...any) BashResult {
	t.Helper()
	args := map[string]any{"command": command}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	res := Call(t, c, "bash", args)
	if res.IsError {
		t.Fatalf("bash %q: tool error: %s", command, Text(res))
	}
	var out BashResult
	Decode(t, res, &out)
	return out
}

// TaskOutput reads a task's new output (waiting for its end if block is set) and fails the test on a
// tool error.
func TaskOutput(t testing.TB, c Caller, id string, block bool) (status, output string) {
	t.Helper()
	res := Call(t, c, "task_output", map[string]any{"task_id": id, "block": block})
	if res.IsError {
		t.Fatalf("task_output %s: %s", id, Text(res))
	}
	var out struct {
		Status string `json:"status"`
		Output string `json:"output"`
	}
	Decode(t, res, &out)
	return out.Status, out.Output
}

// Workspace is a workspace of protocol 2026-07-28 over HTTP: its calls go through the client session
// with the workspace's handle added as the "workspace" argument (unless the call names one).
type Workspace struct {
	CS     *mcp.ClientSession
	Handle string
}

// CallTool calls a tool in the workspace.
func (w *Workspace) CallTool(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	args := map[string]any{}
	if m, ok := p.Arguments.(map[string]any); ok {
		for k, v := range m {
			args[k] = v
		}
	} else if p.Arguments != nil {
		return nil, fmt.Errorf("mcptest: arguments of %s are %T, not a map", p.Name, p.Arguments)
	}
	if _, ok := args["workspace"]; !ok {
		args["workspace"] = w.Handle
	}
	q := *p
	q.Arguments = args
	return w.CS.CallTool(ctx, &q)
}

// OpenResult is workspace_open's structured output, as a client reads it.
type OpenResult struct {
	Workspace    string `json:"workspace"`
	LeaseSeconds int    `json:"lease_seconds"`
	ExpiresAt    string `json:"expires_at"`
	Cwd          string `json:"cwd"`
}

// OpenWorkspace opens a workspace through cs (a client of protocol 2026-07-28 over HTTP), failing the
// test on an error; cleanup closes it.
func OpenWorkspace(t testing.TB, cs *mcp.ClientSession) (*Workspace, OpenResult) {
	t.Helper()
	res := Call(t, cs, "workspace_open", nil)
	if res.IsError {
		t.Fatalf("workspace_open: %s", Text(res))
	}
	var out OpenResult
	Decode(t, res, &out)
	if out.Workspace == "" {
		t.Fatalf("workspace_open returned no handle: %s", Text(res))
	}
	w := &Workspace{CS: cs, Handle: out.Workspace}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(callTimeout))
		defer cancel()
		cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace_close", Arguments: map[string]any{"workspace": w.Handle}})
	})
	return w, out
}
