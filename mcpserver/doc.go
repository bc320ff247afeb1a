// Package mcpserver serves reaper sessions over MCP: it maps tool calls to reaper.Session methods
// and every way an MCP session can end (stdio EOF, HTTP DELETE, the idle lease, a failed keepalive,
// shutdown) to Session.Close.
//
// It holds no process or cgroup logic. What it adds is the part the MCP SDK leaves to servers: the
// SDK has no session-closed callback, and its DELETE and idle timeout wait for running tool calls,
// which may wait on processes. So a reaper session is created on a session's first tool call
// (discovery probes allocate nothing), a watcher per session turns ServerSession.Wait into a
// teardown, and over HTTP a handler in front of the SDK kills a session's processes before the SDK
// sees its DELETE, after checking that the caller owns the session, and keeps its own idle lease that
// a vanished client cannot hold open.
//
// It serves the reaper package, which is Linux-only; elsewhere this package is empty but for its
// logging adapter.
package mcpserver
