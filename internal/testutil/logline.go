package testutil

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ServingHTTP is the message of the line `reaper serve --http` logs once it listens: its attributes
// name the MCP endpoint (url), the admin endpoint (admin, with --admin) and the containment.
const ServingHTTP = "reaper serving MCP over Streamable HTTP"

// LogLine returns the attributes of the first line of log whose message is msg, in either of
// reaper's log formats (text key=value, or one JSON object a line), and whether there is one. A
// test that needs an address reaper chose (port 0) reads it here: the port a server names in its own
// log is one it holds, where a port a test picked beforehand may be taken by anyone meanwhile.
func LogLine(log, msg string) (map[string]string, bool) {
	for line := range strings.Lines(log) {
		line = strings.TrimSpace(line)
		var attrs map[string]string
		if strings.HasPrefix(line, "{") {
			attrs = jsonAttrs(line)
		} else {
			attrs = textAttrs(line)
		}
		if attrs["msg"] == msg {
			return attrs, true
		}
	}
	return nil, false
}

// jsonAttrs returns the top-level fields of a JSON log line, each value as text; nil if it is not
// JSON.
func jsonAttrs(line string) map[string]string {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// textAttrs returns the key=value pairs of a line of log/slog's text handler, which quotes a value
// (Go syntax) when it holds a space, a quote or an equals sign; nil if the line has another form.
func textAttrs(line string) map[string]string {
	out := map[string]string{}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, value, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil
		}
		if strings.HasPrefix(value, `"`) {
			quoted, err := strconv.QuotedPrefix(value)
			if err != nil {
				return nil
			}
			rest = value[len(quoted):]
			value, _ = strconv.Unquote(quoted)
		} else {
			value, rest, _ = strings.Cut(value, " ")
		}
		out[key] = value
	}
	return out
}
