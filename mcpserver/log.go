package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger passes on the SDK's warnings and errors only: its per-connection info lines would
// drown the session log.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelHandler{l.Handler(), slog.LevelWarn})
}

// levelHandler drops records below min.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(name), h.min}
}
