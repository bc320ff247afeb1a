package testutil

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestLogLine reads the attributes back from lines written by slog's own handlers, in both formats,
// with values that need quoting, after other lines.
func TestLogLine(t *testing.T) {
	for name, handler := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(handler(&b))
			log.Warn("something else", "url", "http://wrong")
			log.Info(ServingHTTP, "url", "http://127.0.0.1:41234/mcp", "auth", `no "auth" = none`, "idle_timeout", 30)
			got, ok := LogLine(b.String(), ServingHTTP)
			if !ok {
				t.Fatalf("no line found in\n%s", &b)
			}
			want := map[string]string{"url": "http://127.0.0.1:41234/mcp", "auth": `no "auth" = none`, "idle_timeout": "30", "level": "INFO"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (line %v)", k, got[k], v, got)
				}
			}
			if _, ok := LogLine(b.String(), "absent"); ok {
				t.Error("found a line for a message never logged")
			}
		})
	}
}
