package mcpserver

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// observe is receiving middleware that reports every request's duration and outcome. (A session's
// duration is reported by its watcher, when it ends.)
func (s *Server) observe(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		start := time.Now()
		res, err := next(ctx, method, req)
		op := Operation{Method: bounded(method, slices.Contains(knownMethods, method)), Duration: time.Since(start)}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			op.Transport, op.ProtocolVersion = transport(ss), initializeVersion(ss)
		}
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			op.Transport = "tcp" // a stateless request has no session id
		}
		if op.ProtocolVersion == "" {
			op.ProtocolVersion = requestVersion(req)
		}
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			op.Tool = bounded(call.Params.Name, slices.Contains(toolNames, call.Params.Name))
		}
		var wire *jsonrpc.Error
		switch {
		case errors.As(err, &wire):
			op.ErrorType = strconv.FormatInt(wire.Code, 10)
		case err != nil:
			op.ErrorType = OtherValue
		default:
			if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
				op.ErrorType = "tool_error"
			}
		}
		s.opts.Observer.Operation(op)
		return res, err
	}
}

// transport names the session's transport as network.transport does: stdio sessions have no id.
func transport(ss *mcp.ServerSession) string {
	if ss.ID() == "" {
		return "pipe"
	}
	return "tcp"
}

// initializeVersion is the protocol version the client asked for in initialize, bounded; empty
// without initialize (protocol 2026-07-28 and later).
func initializeVersion(ss *mcp.ServerSession) string {
	if p := ss.InitializeParams(); p != nil {
		return bounded(p.ProtocolVersion, sdkfix.Published(p.ProtocolVersion)) // as the client sent it
	}
	return ""
}

// requestVersion is the protocol version a request of 2026-07-28 or later names in its _meta,
// bounded; empty if it names none.
func requestVersion(req mcp.Request) string {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return ""
	}
	if v, ok := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string); ok {
		return bounded(v, sdkfix.Published(v))
	}
	return ""
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
