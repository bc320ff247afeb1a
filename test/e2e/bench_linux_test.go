package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// minimalServer is the baseline for BenchmarkRoundTrip: a go-sdk server with one bash tool that
// runs the command with plain os/exec, over stdio, or over HTTP at E2E_ADDR when it is set.
func minimalServer() int {
	type in struct {
		Command string `json:"command"`
	}
	type out struct {
		Output   string `json:"output"`
		ExitCode int    `json:"exit_code"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "minimal", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "bash"}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
		b, err := exec.CommandContext(ctx, "bash", "-c", a.Command).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return nil, out{Output: string(b), ExitCode: code}, nil
	})
	if addr := os.Getenv("E2E_ADDR"); addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		http.ListenAndServe(addr, h)
		return 1
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// BenchmarkRoundTrip measures one bash call (`echo hi`) from the go-sdk client to reaper and back,
// over stdio and over HTTP, beside the same call to a minimal go-sdk server that runs the command
// with plain os/exec (minimalServer), in the same run. The two servers' calls alternate, so drift
// hits both alike. ratio is reaper over minimal.
//
//	go test -run '^$' -bench BenchmarkRoundTrip -benchtime 500x ./test/e2e
func BenchmarkRoundTrip(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		b.Run(transport, func(b *testing.B) {
			var reaper, minimal *mcp.ClientSession
			if transport == "stdio" {
				reaper, _, _ = connectStdio(b, cgroupArgs(b)...)
				cmd := testutil.Helper("minimal")
				minimal = connectCmd(b, cmd)
			} else {
				p := startHTTP(b, cgroupArgs(b)...)
				reaper = connectHTTP(b, p.url, "")
				addr := "127.0.0.1:" + itoa(freePort(b))
				cmd := testutil.Helper("minimal", "E2E_ADDR="+addr)
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				waitListening(b, addr)
				minimal = connectHTTP(b, "http://"+addr, "")
			}
			call := func(cs *mcp.ClientSession) time.Duration {
				start := time.Now()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}})
				if err != nil || res.IsError {
					b.Fatal(err, textOf(res))
				}
				return time.Since(start)
			}
			call(reaper)
			call(minimal)
			var tr, tm time.Duration
			b.ResetTimer()
			for range b.N {
				tm += call(minimal)
				tr += call(reaper)
			}
			b.ReportMetric(float64(tr.Microseconds())/float64(b.N), "reaper-µs")
			b.ReportMetric(float64(tm.Microseconds())/float64(b.N), "minimal-µs")
			b.ReportMetric(float64(tr)/float64(tm), "ratio")
		})
	}
}

func connectCmd(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func waitListening(b testing.TB, addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
