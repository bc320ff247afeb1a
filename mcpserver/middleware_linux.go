package mcpserver

import (
	"context"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// middleware is the receiving middleware of the session server, outermost first; New installs it,
// in one call, and nothing else adds any (workspaceMiddleware is the workspace server's). The order
// matters:
//
//  1. sdkfix.EncodeOnce hands the SDK each tool result in its wire form. It is outermost
//     so that everything inside it sees the *mcp.CallToolResult the tools returned.
//  2. observe times every request, including what the layers inside it cost, and reads the result's
//     IsError: it needs the tools' own result, not the wire form.
//  3. trackSessions makes a session's record at the session's first request, whatever its method,
//     so that the session's life is owned from then on (see session).
//  4. dropNullArguments removes null arguments from tool calls before they are validated against
//     the schemas, which the tools' handlers do inside (see addTool).
func (s *Server) middleware() []mcp.Middleware {
	return []mcp.Middleware{sdkfix.EncodeOnce, s.observe, s.trackSessions, dropNullArguments}
}

// trackSessions is receiving middleware that makes the record of a session at its first request
// (see track).
func (s *Server) trackSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			s.track(ss, owner(req), requestVersion(req))
		}
		return next(ctx, method, req)
	}
}

// workspaceMiddleware is the receiving middleware of the workspace server (protocol 2026-07-28 over
// HTTP, stateless: each request has a session of its own, which nothing tracks), outermost first, in
// the order of middleware and for the same reasons. dropNullArguments comes before the tools'
// handlers, so that a workspace sent as null counts as missing (see needsWorkspace).
func (s *Server) workspaceMiddleware() []mcp.Middleware {
	return []mcp.Middleware{sdkfix.EncodeOnce, s.observe, dropNullArguments}
}
