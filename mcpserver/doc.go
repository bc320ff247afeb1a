// Package mcpserver serves reaper sessions over MCP: it maps tool calls to reaper.Session methods, and
// every way a client's session can end to the session's teardown.
//
// It holds no process or cgroup logic. What it adds is the part the MCP SDK leaves to servers: the
// SDK has no session-closed callback, and its DELETE and idle timeout wait for running tool calls,
// which may wait on processes. So one type, session, owns each session's life from its first request
// to its end, in one index, with one way to end it (its doc comment has the state machine): a reaper
// session is created on the first tool call (discovery probes allocate nothing); a watcher per MCP
// session turns ServerSession.Wait (stdio EOF, the SDK's own close) into an end; and over HTTP a
// handler in front of the SDK ends a session on DELETE before the SDK sees it, after checking that
// the caller owns the session, and keeps an idle lease that a vanished client cannot hold open.
//
// One HTTP endpoint serves two protocol eras. Clients that send initialize (2025-11-25 and before)
// get sessions as above. Protocol 2026-07-28 has no sessions: its requests go to a stateless handler
// whose tools act on a workspace, a reaper session held by a handle that workspace_open mints and
// that is bound to the caller's identity (see workspace_linux.go); a workspace is a session of the
// same state machine, ended by workspace_close, its lease or shutdown. Over stdio the connection is
// the session whatever the protocol version.
//
// Where the SDK does something reaper cannot live with, the workaround is in sdkfix (its package
// doc lists them all, with the upstream change each waits for), but for the two that are the
// session's life itself: the session front above, and addTool's own validation of arguments.
//
// It serves the reaper package, which is Linux-only; elsewhere this package holds only its portable
// parts (the message limits, the tools' argument handling and output budget, the observer's types).
package mcpserver
