package mcpserver

import (
	"unicode/utf8"

	"github.com/cgreaper/reaper/reaper"
)

// jsonCost is what one character of output takes in a JSON string as the SDK writes it (Go's
// encoding/json): tab, newline, carriage return, quote and backslash two bytes; other control
// characters, and <, > and & (escaped for HTML) and U+2028 and U+2029, six; others their UTF-8 length.
// The tools' results go out through sdkfix.EncodeOnce, which leaves <, > and & as they are: for
// those the count errs high, cutting such output earlier than it need be, never later.
func jsonCost(r rune) int {
	switch {
	case r == '\t', r == '\n', r == '\r', r == '"', r == '\\':
		return 2
	case r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}

// The output a result carries is counted in characters (Unicode code points), as the agents' own
// shell tools count it: Claude Code's keeps 30,000 characters of a command's output. A result holds
// the output twice, in its text and in its structured content, and each copy is what the model reads:
// clients differ in which they show it. Claude Code hands the model only structuredContent when a
// result has it (anthropics/claude-code#55677, #79944), and so does Cursor; openai-agents-python (by
// default: use_structured_content is false), kimi-code and Claude Desktop show the text content.
const (
	// DefaultMaxOutput is the characters of output a result holds by default.
	DefaultMaxOutput = 30000
	// MaxOutput is the ceiling of a result's output, whatever a call or the server asks for: at most
	// this many characters, costing at most this many bytes of JSON in each copy.
	MaxOutput = 1 << 20
)

// outputBudget caps the output one result carries at chars characters (at most MaxOutput) and
// MaxOutput bytes of JSON per copy. The second cap matters only for output that is expensive to
// carry: control characters, six bytes each in JSON, are cut to about a sixth of it. Without it a
// megabyte of control characters made a 12 MB result, which the SDK copies three times more while it
// encodes it. A cap of one and a half times the limit, which would spare ordinary text, measured
// 1.5-2 times the peak memory of 16 concurrent results of control characters (BenchmarkMemory in
// test/e2e).
func outputBudget(chars int) reaper.Budget {
	return reaper.Budget{Chars: min(chars, MaxOutput), Cost: jsonCost, Max: MaxOutput}
}
