// Package mcptest is the MCP client of reaper's tests: it connects the go-sdk client to a server (the
// real binary over stdio or HTTP, or a Server in the test's own process) at the protocol revision a
// test asks for, calls tools with a deadline and decodes their structured results, and starts the
// escaping processes that tests expect a session's end to kill.
//
// Only tests import it. The helpers that take a Caller work alike in both protocol eras: a
// *mcp.ClientSession calls as it is (a session carries the state), a *Workspace names its workspace
// in every call (protocol 2026-07-28 over HTTP).
package mcptest
