// Package sdkfix holds reaper's workarounds for the MCP go-sdk (v1.8.0): what the SDK does that
// reaper cannot live with, and what it does instead until the SDK changes.
//
// Each workaround's doc says what the SDK does, why reaper cannot live with it, the upstream issue
// or change it waits for (or that none is filed), and what to delete when that lands. They are:
//
//   - NewStdio (stdio.go, lines.go): the SDK's stdio transport ends the whole connection at a line
//     it cannot decode or that is over its size; here such a line is answered and dropped.
//   - inputEnd (inputend.go): the SDK drops the answers to requests read just before the end of a
//     stdio client's input; here the end waits for them.
//   - responseConn (respond.go) and EncodeOnce (encode.go): the SDK re-reads a tool result's bytes
//     once per layer of its encoding; here a result with a command's output is encoded in one pass
//     (a per-call cost: BenchmarkResultEncoding, BenchmarkToolResult).
//   - SchemaFor (schema.go): the schema inference types pointers and slices ["null", X], which some
//     clients cannot read; here every type is a single one.
//   - RequireBearer (bearer.go): the SDK's 401 has no challenge without OAuth metadata.
//   - KeepAlive (keepalive.go): the SDK's keepalive closes a session through a Close that waits for
//     its running tool calls, and gives a ping half an interval.
//   - CheckVersion and AnswerSetLevel (http.go): the SDK's protocol-version check, made again before
//     the session front acts; a sessionless logging/setLevel the SDK's own client sends and its
//     handler refuses.
//
// Two more live in mcpserver, because they are the session's life itself, and are written down
// there. The SDK has no session-closed callback, and its close of a session (a DELETE, its idle
// timeout, its keepalive) waits for the running tool calls, which may wait on the session's
// processes; a DELETE during a 3 s call took 2.7 s. So mcpserver's session front (http_linux.go)
// kills a session's processes on a DELETE before the SDK sees it, and keeps its own idle lease, after
// checking what the SDK would refuse (CheckVersion); a session's end is found through
// ServerSession.Wait. Waits for: a close that cancels the running calls first, and a closed-session
// hook (modelcontextprotocol/go-sdk#479, PR #480 open, HTTP only); none is filed for the former. And
// mcpserver's addTool validates a tool's arguments itself rather than through mcp.AddTool: the SDK's
// typed path checks every structured result against the output schema (a marshal, a parse and a
// validation of up to a megabyte of output per call), its argument refusals cannot say what the tool
// takes, and a check made in middleware instead (needsWorkspace) would get a result without the
// resultType the SDK adds only to a handler's (modelcontextprotocol/go-sdk#1225, fixed by PR #1226
// after v1.8.0). Nothing is filed for the first two; addTool stays while they stand.
//
// Nothing here knows reaper's sessions or processes: mcpserver passes in its limits, its words and
// its verdicts.
package sdkfix
