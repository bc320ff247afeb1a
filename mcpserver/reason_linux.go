package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Why sessions end: the reasons given to reaper.Session.CloseFor, which logs them and reports them
// as a metric label. A fixed set of words.
const (
	reasonDelete       = "delete"       // the client sent DELETE
	reasonIdle         = "idle"         // no request for IdleTimeout
	reasonDisconnected = "disconnected" // the connection closed: stdio EOF, a lost keepalive, the SDK's own close
	reasonShutdown     = "shutdown"     // the server is shutting down
)

// describe says why a session ended, for the client that tries to use it afterwards.
func (s *Server) describe(reason string) string {
	switch reason {
	case reasonDelete:
		return "client DELETE"
	case reasonIdle:
		return fmt.Sprintf("idle for %v", s.opts.IdleTimeout)
	case reasonDisconnected:
		return "connection closed"
	case reasonShutdown:
		return "server shutdown"
	}
	return reason
}

// sessionName is the name an HTTP session goes by outside the MCP layer: in reaper's logs and errors,
// its state directory and `reaper ps`. It is not the Mcp-Session-Id itself, which is the session's
// only credential where HTTP runs without a token on loopback, and must not end up in logs: it is
// "mcp-" and the first 12 hex digits of the id's SHA-256, which the client that holds the id can
// compute (printf %s "$ID" | sha256sum | cut -c1-12) and nobody can turn back into the id.
func sessionName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "mcp-" + hex.EncodeToString(sum[:6])
}
