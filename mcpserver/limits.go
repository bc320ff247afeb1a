package mcpserver

import (
	"fmt"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/jsonlimit"
	"github.com/cgreaper/reaper/internal/textfit"
	"github.com/cgreaper/reaper/reaper"
)

// DefaultMaxCallBytes bounds a tools/call message unless Options.MaxCallBytes says otherwise: a
// command (reaper takes up to 100 KiB), the input for a task, and the options, with room to spare.
const DefaultMaxCallBytes = 1 << 20

// The bounds of every message that are not configurable.
const (
	// maxOtherBytes bounds a message of any method but tools/call (initialize, ping, lists,
	// notifications), and a message whose method cannot be read.
	maxOtherBytes = 64 << 10
	// maxDepth bounds how deeply a message's objects and arrays nest; a tool call needs 5.
	maxDepth = 32
	// maxValues bounds the values of a message; a tool call has a few dozen.
	maxValues = 10000
	// maxDrainBytes is how much of a message over its size limit is read, and thrown away, to find
	// its id and answer it; a longer one is not answered (HTTP: 413 and the connection closed).
	maxDrainBytes = 64 << 20
)

// messageLimits are what a message is held to before the SDK decodes it, over stdio (as
// sdkfix.Limits) and HTTP (admitBody): its size by method, and its depth and count of values, since
// decoding costs memory in proportion to the values, not the bytes.
type messageLimits struct {
	callBytes int // tools/call (and a batch)
}

// Scanner returns a scanner for one message.
func (l messageLimits) Scanner() *jsonlimit.Scanner {
	return &jsonlimit.Scanner{Limits: jsonlimit.Limits{Depth: maxDepth, Values: maxValues}}
}

// Most is the largest message any method may send: what a reader must be ready to take whole.
func (l messageLimits) Most() int { return max(l.callBytes, maxOtherBytes) }

// Check returns why a message of size bytes, scanned by sc, is refused, or "" if it is not.
func (l messageLimits) Check(sc *jsonlimit.Scanner, size int64) string {
	method := sc.Method()
	limit, flag := int64(maxOtherBytes), ""
	if method == "tools/call" || sc.Batch {
		limit, flag = int64(l.callBytes), " (--max-call-size)"
	}
	switch {
	case size > limit:
		what := "a " + method + " message"
		if method == "tools/call" {
			what = "a tool call"
		} else if method == "" {
			what = "this message"
		}
		return fmt.Sprintf("%s of %s is over the limit of %s%s; nothing of it was run. Put large inputs in files, and send several smaller commands",
			what, textfit.ByteSize(size), textfit.ByteSize(limit), flag)
	case sc.Err != nil:
		return "message refused: " + sc.Err.Error() + "; nothing of it was run"
	}
	return ""
}

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

// The output a result carries is counted in characters, as the agents' own shell tools count it
// (Claude Code's keeps 30,000). A result holds it twice, in its text and its structured content:
// clients differ in which they show the model.
const (
	// DefaultMaxOutput is the characters of output a result holds by default.
	DefaultMaxOutput = 30000
	// MaxOutput is the ceiling of a result's output, whatever a call or the server asks for: at most
	// this many characters, costing at most this many bytes of JSON in each copy.
	MaxOutput = 1 << 20
)

// outputBudget caps the output one result carries at chars characters (at most MaxOutput) and
// MaxOutput bytes of JSON per copy. The second cap matters for control characters, six bytes each in
// JSON: without it a megabyte of them made a 12 MB result, which the SDK copies three times more
// (BenchmarkMemory in test/e2e).
func outputBudget(chars int) reaper.Budget {
	return reaper.Budget{Chars: min(chars, MaxOutput), Cost: jsonCost, Max: MaxOutput}
}
