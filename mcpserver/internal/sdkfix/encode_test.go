package sdkfix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWireResultNotMarshaler checks that wireResult does not inherit CallToolResult.MarshalJSON:
// encoding/json would call it, and the layers wireResult saves would be back.
func TestWireResultNotMarshaler(t *testing.T) {
	for _, v := range []any{wireResult{}, &wireResult{}} {
		if _, ok := v.(json.Marshaler); ok {
			t.Errorf("%T is a json.Marshaler", v)
		}
	}
	var _ mcp.Result = (*wireResult)(nil)
}

// TestWireResultSameAsSDK calls a tool on a bare SDK server with and without EncodeOnce, over
// protocol versions with and without resultType and _meta.serverInfo, and compares the results as
// they arrive: the same keys in the same order with the same values, and the same bytes unless the
// strings hold <, > or & (which the SDK escapes for HTML, and wireResult does not).
func TestWireResultSameAsSDK(t *testing.T) {
	const weird = "<a href=\"x\">&amp;</a>\t\r\n\x01\x1f\x7f \u2028\u2029 é 漢 \U0001F600 \\ \"q\" \ufffd"
	cases := []struct {
		name string
		res  func() *mcp.CallToolResult
		html bool // the strings hold <, > or &
	}{
		{"bash", func() *mcp.CallToolResult {
			r := text("hi\n[exit code 0]\n[cwd: /tmp]\n")
			r.StructuredContent = commandOutput{Output: "hi\n", Status: "completed", ExitCode: new(0), Cwd: "/tmp"}
			return r
		}, false},
		{"escapes", func() *mcp.CallToolResult {
			r := text(weird + "\n[exit code 1]\n[cwd: /t\"mp]\n")
			r.StructuredContent = commandOutput{Output: weird, Status: "failed", ExitCode: new(1), Cwd: "/t\"mp", DroppedBytes: 7, Leftover: 2}
			return r
		}, true},
		{"background", func() *mcp.CallToolResult {
			r := text("Started background task t1.")
			r.StructuredContent = commandOutput{Status: "running", TaskID: "t1", Cwd: "/"}
			return r
		}, false},
		{"error with structured content", func() *mcp.CallToolResult {
			r := text("no such task")
			r.IsError = true
			r.StructuredContent = map[string]any{"task_id": "t9", "status": "unknown"}
			return r
		}, false},
		{"meta", func() *mcp.CallToolResult {
			r := text("x")
			r.Meta = mcp.Meta{"reaper/x": "<y>", "n": 1}
			r.StructuredContent = struct {
				Tasks []commandOutput `json:"tasks"`
				Names []string        `json:"names"`
			}{Tasks: []commandOutput{}, Names: []string{"<a>"}}
			return r
		}, true},
		{"not ours: two blocks", func() *mcp.CallToolResult {
			r := text("a")
			r.Content = append(r.Content, &mcp.TextContent{Text: "b"})
			r.StructuredContent = map[string]any{"a": 1}
			return r
		}, false},
		{"not ours: no structured content", func() *mcp.CallToolResult { return text("<plain>") }, true},
	}
	for _, version := range []string{"", "2025-11-25", "2025-06-18", "2024-11-05"} {
		for _, tc := range cases {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				sdk := callRaw(t, version, false, tc.res)
				ours := callRaw(t, version, true, tc.res)
				if !tc.html && !bytes.Equal(ours, sdk) {
					t.Errorf("EncodeOnce sent\n%s\nthe SDK\n%s", ours, sdk)
				}
				if o, s := tokens(t, ours), tokens(t, sdk); !reflect.DeepEqual(o, s) {
					t.Errorf("EncodeOnce sent\n%s\nthe SDK\n%s", ours, sdk)
				}
				if version == "" && !bytes.Contains(sdk, []byte(`"resultType":"complete"`)) {
					t.Errorf("the SDK sent no resultType at the latest version: %s", sdk)
				}
			})
		}
	}
}

// callRaw calls a tool that returns res() on a bare SDK server (with EncodeOnce if once), from a
// client of protocol version (the latest if empty), and returns the result as it arrived.
func callRaw(t *testing.T, version string, once bool, res func() *mcp.CallToolResult) json.RawMessage {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "wire-test", Version: "v<1>"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return res(), nil
	})
	if once {
		srv.AddReceivingMiddleware(EncodeOnce)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &resultRecorder{Transport: ct}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, rec, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait(); cancel() })
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	return rec.last()
}

// resultRecorder is a client transport that keeps the result of the last response it read.
type resultRecorder struct {
	mcp.Transport
	mu     sync.Mutex
	result json.RawMessage
}

func (r *resultRecorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	return &recordingConn{c, r}, err
}

func (r *resultRecorder) last() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

type recordingConn struct {
	mcp.Connection
	r *resultRecorder
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Result != nil {
		c.r.mu.Lock()
		c.r.result = append(json.RawMessage(nil), resp.Result...)
		c.r.mu.Unlock()
	}
	return msg, err
}

// tokens returns the JSON tokens of b, strings decoded: equal for two encodings of the same object
// with its keys in the same order.
func tokens(t *testing.T, b []byte) []any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out []any
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		out = append(out, tok)
	}
}

// commandOutput is the shape of a command's structured result (mcpserver's BashOutput, in part).
type commandOutput struct {
	Output       string `json:"output"`
	Status       string `json:"status"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	DroppedBytes int64  `json:"dropped_bytes,omitempty"`
	Cwd          string `json:"cwd"`
	TaskID       string `json:"task_id,omitempty"`
	Leftover     int    `json:"leftover_processes,omitempty"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
