package mcpserver

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// limitedLogger returns l without its records below min, and at most logBurst records a second
// counted in lim (shared by the loggers given it), for lines that a client can make at will: it must
// not fill reaper's log and the disk behind it. The first line after those left out says how many.
func limitedLogger(l *slog.Logger, min slog.Level, lim *logLimit) *slog.Logger {
	return slog.New(levelHandler{l.Handler(), min, lim})
}

// logBurst is the most lines the loggers of one logLimit write in one second.
const logBurst = 20

// levelHandler drops records below min, and those over lim.
type levelHandler struct {
	slog.Handler
	min slog.Level
	lim *logLimit // shared by the handlers WithAttrs and WithGroup make
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, dropped := h.lim.take(time.Now())
	if !ok {
		return nil
	}
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("lines_left_out", dropped))
	}
	return h.Handler.Handle(ctx, r)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(as), h.min, h.lim}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(name), h.min, h.lim}
}

// logLimit counts log lines by the second (see limitedLogger).
type logLimit struct {
	// mu guards the fields that follow. It is a leaf.
	mu      sync.Mutex
	second  int64 // the Unix second counted
	n       int   // lines of that second
	dropped int   // lines left out since the last one written
}

// take reports whether a line made at now may be written, and how many were left out before it.
func (l *logLimit) take(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := now.Unix(); s != l.second {
		l.second, l.n = s, 0
	}
	if l.n >= logBurst {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}
