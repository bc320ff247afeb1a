// Package mcpserver serves reaper sessions over MCP: it maps tool calls to reaper.Session methods, and
// every way a client's session can end to the session's teardown.
//
// It holds no process or cgroup logic. One type, session, owns each session's life from its first
// request to its end, with one way to end it (its doc comment has the state machine). One HTTP
// endpoint serves two protocol eras: clients that send initialize (2025-11-25 and before) get
// sessions; protocol 2026-07-28 has none, and its tools act on a workspace, a session held by a
// handle bound to the caller's identity (see workspace_linux.go). Over stdio the connection is the
// session whatever the protocol version. Workarounds for the MCP SDK are in sdkfix, but for the two
// that are the session's life itself (its package doc lists them all).
//
// It serves the reaper package, which is Linux-only; elsewhere this package holds only its portable
// parts (the message limits, the tools' argument handling and output budget, the observer's types).
package mcpserver
