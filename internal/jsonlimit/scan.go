// Package jsonlimit measures a JSON-RPC message before anything decodes it: its nesting depth, how
// many values it holds, and the method and id it names, in one pass over its bytes as they arrive,
// keeping nothing of the message but the id's and the method's few bytes.
//
// Decoding JSON into Go values costs far more memory than the text (14.5 MB of small keys in a
// map[string]any cost about 300 MiB), so bounding a message's size, depth and values bounds what
// decoding can cost. encoding/json has no such pass: Valid counts nothing, Decoder.Token allocates a
// value per token, and neither can tell a request's id from a message cut short.
//
// A Scanner does not check that the text is valid JSON beyond what it needs to count: whatever
// decodes the message next still refuses malformed text, within the bounds the Scanner checked (a
// malformed text is counted as if each of its tokens were a value).
package jsonlimit

import (
	"errors"
	"fmt"
)

// Limits bounds a message. A zero field means no bound on that measure.
type Limits struct {
	// Depth bounds how deeply objects and arrays nest: {} is 1 deep, {"a":[1]} 2.
	Depth int
	// Values bounds the values the message holds, at every depth: every object, array, string,
	// number, true, false and null counts one (an object's keys are not values; each key has one).
	Values int
}

// The longest method name and id a Scanner reports, in bytes as they stand in the text (a string's
// quotes and escapes included).
const (
	MaxMethodBytes = 128
	MaxIDBytes     = 256
)

// ErrDepth and ErrValues are the causes of a message over its Limits.
var (
	ErrDepth  = errors.New("nested too deeply")
	ErrValues = errors.New("too many values")
)

// LimitError is a message over one of its Limits.
type LimitError struct {
	Err   error // ErrDepth or ErrValues
	Limit int
}

func (e *LimitError) Error() string {
	if e.Err == ErrDepth {
		return fmt.Sprintf("objects and arrays nest at most %d deep", e.Limit)
	}
	return fmt.Sprintf("a message holds at most %d values (every object, array, string, number, true, false and null counts one)", e.Limit)
}

func (e *LimitError) Unwrap() error { return e.Err }

// A Scanner measures one message fed to it in pieces. The zero value measures without limits.
type Scanner struct {
	// Limits are checked as the bytes come; the first one exceeded is Err's cause.
	Limits Limits

	// Depth and Values are the message's measures so far (see Limits).
	Depth, Values int
	// Batch is set when the message is a JSON array (a JSON-RPC batch).
	Batch bool
	// Err is set, once, when the message first goes over Limits. The scan goes on (for the id,
	// which may come last), counting but not checking.
	Err error

	id, method []byte // the top-level "id" and "method" members' values, once whole
	depth      int
	objects    uint64 // bit d-1 set: the container at depth d (up to 64) is an object
	top        bool   // the message is an object
	expectKey  bool   // the next string at this depth is an object's key
	inString   bool
	escaped    bool
	isKey      bool   // the string being read is a key
	inScalar   bool   // a number or literal is being read
	tok        []byte // the top-level key or value being read, while it may matter
	tokBig     bool   // it outgrew what would matter
	want       byte   // 'i' or 'm' once the key "id" or "method" was read at the top level
}

// Feed measures the next bytes of the message.
func (s *Scanner) Feed(b []byte) {
	for _, c := range b {
		s.byte(c)
	}
}

// ID returns the top-level "id" member's value as it stands in the text, if it is a number or a
// string of at most MaxIDBytes; nil otherwise. Call it after the whole message was fed.
func (s *Scanner) ID() []byte {
	s.endScalar()
	return s.id
}

// Method returns the top-level "method" member's string, without its quotes and as it stands in the
// text, if it is at most MaxMethodBytes long; "" otherwise. Call it after the whole message was fed.
func (s *Scanner) Method() string {
	if len(s.method) < 2 {
		return ""
	}
	return string(s.method[1 : len(s.method)-1])
}

func (s *Scanner) byte(c byte) {
	if s.inString {
		s.keep(c)
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			s.endToken(true)
		}
		return
	}
	if s.inScalar {
		switch c {
		case ' ', '\t', '\r', '\n', ',', ':', '}', ']', '{', '[', '"':
			s.endScalar()
		default:
			s.keep(c)
			return
		}
	}
	switch c {
	case ' ', '\t', '\r', '\n':
	case ',':
		s.expectKey = s.depth >= 1 && s.depth <= 64 && s.objects&(1<<(s.depth-1)) != 0
	case ':':
		s.expectKey = false
	case '}', ']':
		if s.depth > 0 {
			s.depth--
		}
		s.expectKey = false
	case '{', '[':
		s.value()
		s.depth++
		s.Depth = max(s.Depth, s.depth)
		if s.Limits.Depth > 0 && s.depth > s.Limits.Depth && s.Err == nil {
			s.Err = &LimitError{Err: ErrDepth, Limit: s.Limits.Depth}
		}
		if s.depth <= 64 {
			if c == '{' {
				s.objects |= 1 << (s.depth - 1)
			} else {
				s.objects &^= 1 << (s.depth - 1)
			}
		}
		s.expectKey = c == '{'
		if s.depth == 1 {
			s.top, s.Batch = c == '{', c == '['
		}
		if s.depth == 2 {
			s.want = 0 // an object or array is neither an id nor a method
		}
	case '"':
		s.isKey = s.expectKey
		s.expectKey = false
		if !s.isKey {
			s.value()
		}
		s.inString = true
		s.tok, s.tokBig = s.tok[:0], false
		s.keep(c)
	default:
		s.value()
		s.inScalar = true
		s.tok, s.tokBig = s.tok[:0], false
		s.keep(c)
	}
}

func (s *Scanner) value() {
	s.Values++
	if s.Limits.Values > 0 && s.Values > s.Limits.Values && s.Err == nil {
		s.Err = &LimitError{Err: ErrValues, Limit: s.Limits.Values}
	}
}

// keep adds c to the token being read, while it is at the top level and may matter.
func (s *Scanner) keep(c byte) {
	if s.depth != 1 || !s.top || s.tokBig {
		return
	}
	if len(s.tok) >= MaxIDBytes {
		s.tokBig = true
		return
	}
	s.tok = append(s.tok, c)
}

func (s *Scanner) endScalar() {
	if s.inScalar {
		s.inScalar = false
		s.endToken(false)
	}
}

func (s *Scanner) endToken(str bool) {
	if s.depth != 1 || !s.top {
		return
	}
	if s.isKey {
		s.isKey = false
		s.want = 0
		if !s.tokBig {
			switch string(s.tok) {
			case `"id"`:
				s.want = 'i'
			case `"method"`:
				s.want = 'm'
			}
		}
		return
	}
	switch {
	case s.tokBig:
	case s.want == 'i' && (str || len(s.tok) > 0 && (s.tok[0] == '-' || s.tok[0] >= '0' && s.tok[0] <= '9')):
		s.id = append(s.id[:0], s.tok...)
	case s.want == 'm' && str && len(s.tok)-2 <= MaxMethodBytes:
		s.method = append(s.method[:0], s.tok...)
	}
	s.want = 0
}
