package mcpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport returns the transport for serving one client over in and out (stdin and stdout):
// newline-delimited JSON-RPC, as mcp.IOTransport, except for a message the limits refuse (see
// limits.go): the SDK's transport ends the whole connection at a line over its length; this one
// discards the message, answers it with a JSON-RPC error that says why (when it is a request whose id
// can be read) and goes on, as the HTTP handler does. Closing the transport closes neither in nor out.
func (s *Server) StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &lockedWriter{w: out}
	r := &lineReader{src: bufio.NewReaderSize(in, 64<<10), limits: s.limits}
	r.refuse = func(id []byte, why string, size int64) {
		s.log.Warn("stdio message refused", "bytes", size, "why", why, "id", string(id))
		s.opts.Observer.Refused(RefusedMessage)
		if line := errorLine(id, codeInvalidRequest, why); line != nil {
			w.Write(line)
		}
	}
	// lineReader enforces the limits; responses are written around their results (see respond.go).
	return &responseTransport{inner: &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1}, out: w, batch: &r.batch}
}

// StdioCloseGrace caps the grace period of a session whose stdio client closed the connection. MCP
// clients end a stdio server by closing its input, then send SIGTERM if it has not exited "within a
// reasonable time" and SIGKILL after that; the TypeScript SDK waits 2 s before SIGTERM. With the grace
// capped at a second, reaper has torn everything down and exited before that SIGTERM comes.
const StdioCloseGrace = time.Second

// Run serves one connection (stdio) until the client disconnects, then ends its session, within
// StdioCloseGrace (see disconnected), and returns. If ctx is done first, Run returns ctx's error at
// once and leaves the session to Close, which the caller calls with the context its teardown should
// have.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: connect: %w", err)
	}
	st := s.track(ss, "", "") // or its first request has already
	if st == nil {
		ss.Close()
		return errShuttingDown
	}
	select {
	case <-st.retired: // the connection closed and the session's end is done
		return ss.Wait()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// disconnected returns the context of the teardown of a session whose MCP session closed under it.
// A stdio client that closed the connection is on its way to killing this process (see
// StdioCloseGrace), so its session's grace period is capped. Over HTTP the SDK closed the session
// itself (its own idle timeout, long after the lease's): the teardown keeps its grace period.
func (s *Server) disconnected(st *session) (context.Context, context.CancelFunc) {
	if st.key.kind == kindConn {
		return context.WithTimeout(context.Background(), StdioCloseGrace)
	}
	return context.WithCancel(context.Background())
}
