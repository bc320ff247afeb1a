package mcpserver

import (
	"time"
)

// Observer is told of every MCP request and session, for metrics. Its methods are called on the
// server's goroutines: they must be safe for concurrent use and return promptly.
type Observer interface {
	// Operation is called when a request or notification from a client has been handled.
	Operation(Operation)
	// SessionEnded is called when an MCP session the server saw a request on has ended.
	SessionEnded(SessionInfo)
	// Refused is called when a request is refused at one of the server's limits, named by one of
	// the Refused* constants.
	Refused(limit string)
}

// The limits a request can be refused at, as Observer.Refused names them.
const (
	// RefusedMessage: a message over its size, depth or count of values (see limits.go).
	RefusedMessage = "message"
	// RefusedSessions: a new session or workspace when the server holds MaxSessions.
	RefusedSessions = "sessions"
	// RefusedIdentitySessions: a new session or workspace of an identity that holds
	// MaxSessionsPerIdentity, or MaxWorkspaces workspaces.
	RefusedIdentitySessions = "identity_sessions"
)

// Operation describes one request or notification handled, in the terms of the OpenTelemetry
// conventions for MCP (mcp.server.operation.duration). Every string has few possible values.
type Operation struct {
	// Method is the MCP method ("tools/call"); OtherValue for a method the protocol does not define.
	Method string
	// Tool is the tool's name for tools/call, OtherValue for a tool this server does not have; empty
	// otherwise.
	Tool string
	// Transport is "pipe" (stdio) or "tcp" (Streamable HTTP), as network.transport.
	Transport string
	// ProtocolVersion is the MCP version the client asked for in initialize or, from 2026-07-28 on,
	// named in the request's _meta; OtherValue for one not published.
	ProtocolVersion string
	// ErrorType is empty on success, "tool_error" for a tool result marked as an error, the JSON-RPC
	// error code for a protocol error, and OtherValue for any other failure.
	ErrorType string
	Duration  time.Duration
}

// SessionInfo describes an MCP session that ended (mcp.server.session.duration).
type SessionInfo struct {
	Transport       string
	ProtocolVersion string
	Duration        time.Duration
}

// OtherValue stands for any value outside a known set, as in the OpenTelemetry conventions: label
// values stay bounded whatever clients send.
const OtherValue = "_OTHER"

// knownMethods are the methods a client may send a server, in the protocol versions the SDK speaks.
var knownMethods = []string{
	"initialize", "ping", "server/discover",
	"tools/list", "tools/call", "prompts/list", "prompts/get",
	"resources/list", "resources/read", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
	"logging/setLevel", "completion/complete",
	"notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
}

// toolNames are this server's tools, in both protocol eras.
var toolNames = []string{"bash", "task_output", "task_stop", "task_list", "write_stdin", "workspace_open", "workspace_close", "workspace_list"}

type nopObserver struct{}

func (nopObserver) Operation(Operation)      {}
func (nopObserver) SessionEnded(SessionInfo) {}
func (nopObserver) Refused(string)           {}

// bounded is v where it is known (a method, tool or protocol revision reaper knows of), OtherValue
// otherwise: what a client names never becomes a label of its own.
func bounded(v string, known bool) string {
	if known {
		return v
	}
	return OtherValue
}
