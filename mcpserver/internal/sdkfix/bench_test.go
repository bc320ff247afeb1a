package sdkfix

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolResult measures a tool call whose result carries a command's output (24 KB and
// 1 MB of it, twice: in its text and in its structured content, as reaper's results do), from the
// go-sdk client over pipes to a server in this process and back, served four ways in the same run,
// their calls in rotation so that load hits all alike:
//
//   - sdk: as the SDK would, mcp.AddTool with a typed output and mcp.IOTransport (the baseline);
//   - structured: the output set as the result's structured content by the handler, which the SDK
//     then does not marshal, parse back and check against the output schema (mcpserver's
//     structured and addTool);
//   - once: and EncodeOnce;
//   - stdio: and NewStdio, which writes a response around its result's bytes: what reaper serves.
//
// Each reports its mean time per call (<way>-µs), the CPU time the process spent per call
// (<way>-cpu-µs: client and server, which depends less on what else the machine runs), and the ratio
// of its CPU time to sdk's (<way>/sdk). The client's own decoding of the result is in every figure
// alike.
//
//	go test -run '^$' -bench BenchmarkToolResult -benchtime 200x ./mcpserver/internal/sdkfix
func BenchmarkToolResult(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"24KB", 24 << 10}, {"1MB", 1000 * 1000}} {
		b.Run(size.name, func(b *testing.B) {
			out := commandOutput{Output: strings.Repeat("~", size.n), Status: "completed", ExitCode: new(0), Cwd: "/tmp"}
			note := "\n[exit code 0]\n[cwd: /tmp]\n"
			typed := func(context.Context, *mcp.CallToolRequest, struct {
				Command string `json:"command"`
			}) (*mcp.CallToolResult, commandOutput, error) {
				return text(out.Output + note), out, nil
			}
			raw := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct {
					Command string `json:"command"`
				}
				if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
					return nil, err
				}
				r := text(out.Output + note)
				r.StructuredContent = out
				return r, nil
			}
			ways := []struct {
				name       string
				call       func() time.Duration
				total, cpu time.Duration
			}{
				{name: "sdk", call: benchServer(b, func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "bash"}, typed) }, false, size.n)},
				{name: "structured", call: benchServer(b, rawTool(raw), false, size.n)},
				{name: "once", call: benchServer(b, rawTool(raw, EncodeOnce), false, size.n)},
				{name: "stdio", call: benchServer(b, rawTool(raw, EncodeOnce), true, size.n)},
			}
			for _, w := range ways {
				w.call() // each connection's first call out of the count
			}
			b.ResetTimer()
			for i := range b.N {
				for j := range ways {
					w := &ways[(i+j)%len(ways)]
					c := cpuTime(b)
					w.total += w.call()
					w.cpu += cpuTime(b) - c
				}
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
			for _, w := range ways {
				b.ReportMetric(per(w.total), w.name+"-µs")
				b.ReportMetric(per(w.cpu), w.name+"-cpu-µs")
				if w.name != "sdk" {
					b.ReportMetric(float64(w.cpu)/float64(ways[0].cpu), w.name+"/sdk")
				}
			}
		})
	}
}

// rawTool returns what adds the tool bash with handler h, and middleware, to a server.
func rawTool(h mcp.ToolHandler, middleware ...mcp.Middleware) func(*mcp.Server) {
	return func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "bash", InputSchema: SchemaFor[struct {
			Command string `json:"command"`
		}](), OutputSchema: SchemaFor[commandOutput]()}, h)
		s.AddReceivingMiddleware(middleware...)
	}
}

// benchServer serves a server that add sets up over pipes (through NewStdio if stdio, else
// mcp.IOTransport), connects the go-sdk client to it, and returns a call of its tool bash that checks
// the result's output (n bytes of it) and returns how long the call took.
func benchServer(b *testing.B, add func(*mcp.Server), stdio bool, n int) func() time.Duration {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	add(srv)
	inR, inW := io.Pipe()   // client to server
	outR, outW := io.Pipe() // server to client
	var st mcp.Transport = &mcp.IOTransport{Reader: inR, Writer: outW}
	if stdio {
		st = NewStdio(inR, outW, StdioOptions{Limits: testLimits{call: 1 << 20, other: 64 << 10}, EndWait: time.Second})
	}
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-client"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cs.Close()
		inW.Close()
		ss.Wait()
		outW.Close()
		cancel()
	})
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "head -c N /dev/zero | tr '\\0' '~'"}}
	return func() time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		m, _ := res.StructuredContent.(map[string]any)
		if got, _ := m["output"].(string); len(got) != n || res.IsError {
			b.Fatalf("%d bytes of output arrived (error %v), want %d", len(got), res.IsError, n)
		}
		return d
	}
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkResultEncoding measures the server's side alone: a tool result with a command's output
// (24 KB and 1 MB, in its text and its structured content) made into the line that goes out, as the
// SDK makes it (the result's MarshalJSON layers, then the message around it: sdk), through EncodeOnce
// (once), and through EncodeOnce and responseLine (stdio, what reaper writes over stdio).
//
//	go test -run '^$' -bench BenchmarkResultEncoding ./mcpserver/internal/sdkfix
func BenchmarkResultEncoding(b *testing.B) {
	id, err := jsonrpc.MakeID(float64(7))
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"24KB", 24 << 10}, {"1MB", 1000 * 1000}} {
		out := commandOutput{Output: strings.Repeat("~", size.n), Status: "completed", ExitCode: new(0), Cwd: "/tmp"}
		result := func() *mcp.CallToolResult {
			r := text(out.Output + "\n[exit code 0]\n[cwd: /tmp]\n")
			r.StructuredContent = out
			return r
		}
		for _, way := range []struct {
			name   string
			encode func() ([]byte, error)
		}{
			{"sdk", func() ([]byte, error) { return messageOf(id, result()) }},
			{"once", func() ([]byte, error) { return messageOf(id, newWireResult(result())) }},
			{"stdio", func() ([]byte, error) {
				raw, err := marshalNoHTML(newWireResult(result()))
				if err != nil {
					return nil, err
				}
				line, _ := responseLine(&jsonrpc.Response{ID: id, Result: raw})
				return line, nil
			}},
		} {
			b.Run(size.name+"/"+way.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if line, err := way.encode(); err != nil || len(line) < 2*size.n {
						b.Fatalf("%d bytes, %v", len(line), err)
					}
				}
			})
		}
	}
}

// messageOf encodes a response with result as the SDK's connection does: the result marshaled
// without HTML escaping, then the message around it.
func messageOf(id jsonrpc.ID, result any) ([]byte, error) {
	raw, err := marshalNoHTML(result)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: raw})
}

// marshalNoHTML is json.Marshal without HTML escaping, as the SDK marshals a result.
func marshalNoHTML(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
