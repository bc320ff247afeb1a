package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport returns the transport for serving one client over in and out (stdin and stdout):
// newline-delimited JSON-RPC, as mcp.IOTransport, except that a line the limits refuse or that is no
// JSON-RPC message is answered with an error and dropped, and that at the end of in every request
// read before it is answered (see sdkfix.NewStdio). Closing the transport closes neither in nor out.
func (s *Server) StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	return sdkfix.NewStdio(in, out, sdkfix.StdioOptions{
		Limits:  s.limits,
		EndWait: StdioCloseGrace,
		Refused: func(id []byte, why string, size int64) {
			s.clientLog.Warn("stdio message refused", "bytes", size, "why", why, "id", string(id))
			s.opts.Observer.Refused(RefusedMessage)
		},
	})
}

// StdioCloseGrace caps the time from the end of a stdio client's input to the end of its session's
// teardown: the answers to the requests read before the end, then the grace period of the session's
// processes. MCP clients close a stdio server's input, then send SIGTERM "within a reasonable time"
// (the TypeScript SDK: 2 s): reaper has exited by then.
const StdioCloseGrace = time.Second

// Run serves one connection (stdio) until the client disconnects, then ends its session, within
// StdioCloseGrace (see disconnected), and returns. If ctx is done first, Run returns ctx's error at
// once and leaves the session to Close, which the caller calls with the context its teardown should
// have.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	input, _ := t.(*sdkfix.Stdio)
	if input != nil {
		ctx = context.WithValue(ctx, inputKey{}, input) // the tool calls' contexts are made from it
	}
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: connect: %w", err)
	}
	st := s.track(ss, "", "") // or its first request has already
	if st == nil {
		ss.Close()
		return errShuttingDown
	}
	s.mu.Lock()
	st.input = input
	s.mu.Unlock()
	select {
	case <-st.retired: // the connection closed and the session's end is done
		return ss.Wait()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// disconnected returns the context of the teardown of a session whose MCP session closed under it:
// over stdio, done StdioCloseGrace after the end of its input (see StdioCloseGrace); over HTTP (the
// SDK's own idle timeout) the teardown keeps its grace period.
func (s *Server) disconnected(st *session) (context.Context, context.CancelFunc) {
	if st.key.kind != kindConn {
		return context.WithCancel(context.Background())
	}
	s.mu.Lock()
	input := st.input
	s.mu.Unlock()
	end := time.Now()
	if input != nil {
		if at := input.EndedAt(); !at.IsZero() {
			end = at
		}
	}
	return context.WithDeadline(context.Background(), end.Add(StdioCloseGrace))
}

// inputKey is the context key of a stdio connection's transport, in the contexts of its requests.
type inputKey struct{}

// untilInputEnds returns the context a tool call runs in: ctx, cancelled with errInputEnded when the
// stdio client's input ends, and the function that releases it. A call that begins after the end
// is refused (err): it was read before the end, and is answered, but nothing of it is run.
func untilInputEnds(ctx context.Context) (_ context.Context, release func(), err error) {
	input, _ := ctx.Value(inputKey{}).(*sdkfix.Stdio)
	if input == nil {
		return ctx, func() {}, nil
	}
	if input.Ended().Err() != nil {
		return ctx, func() {}, fmt.Errorf("not run: %w", errInputEnded)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(input.Ended(), func() { cancel(errInputEnded) })
	return ctx, func() { stop(); cancel(nil) }, nil
}

// errInputEnded is why a tool call is cut short, or not begun, once the stdio client has closed
// reaper's input.
var errInputEnded = errors.New("the client closed reaper's input (stdin): the session ends, and everything it started is killed")
