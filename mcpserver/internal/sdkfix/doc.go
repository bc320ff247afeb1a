// Package sdkfix holds reaper's workarounds for the MCP go-sdk (v1.8.0): what the SDK does that
// reaper cannot live with, and what it does instead until the SDK changes.
//
// Each workaround's doc says what the SDK does, why reaper cannot live with it, the upstream issue
// or change it waits for (or that none is filed), and what to delete when that lands: NewStdio
// (stdio.go, lines.go, inputend.go, respond.go), EncodeOnce, SchemaFor, RequireBearer, KeepAlive,
// CheckVersion and AnswerSetLevel.
//
// Two more live in mcpserver, because they are the session's life itself. The SDK's close of a
// session (a DELETE, its idle timeout, its keepalive) waits for the running tool calls, which may
// wait on the session's processes, and it has no session-closed callback; so mcpserver's session
// front (http_linux.go) kills a session's processes on a DELETE before the SDK sees it and keeps
// its own idle lease. Waits for: a close that cancels the running calls first (none filed), and a
// closed-session hook (modelcontextprotocol/go-sdk#479, PR #480 open, HTTP only). And mcpserver's
// addTool validates a tool's arguments itself rather than through mcp.AddTool: the SDK's typed path
// checks every structured result against the output schema (up to a megabyte per call), its
// argument refusals cannot say what the tool takes, and a check made in middleware instead
// (needsWorkspace) would get a result without the resultType (modelcontextprotocol/go-sdk#1225,
// fixed by PR #1226 after v1.8.0). Nothing is filed for the first two; addTool stays while they
// stand.
//
// Nothing here knows reaper's sessions or processes: mcpserver passes in its limits, its words and
// its verdicts.
package sdkfix
