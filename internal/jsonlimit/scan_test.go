package jsonlimit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// measure is the reference: the message's tokens as encoding/json reads them (duplicate keys
// included, which a decoded map would fold).
func measure(t testing.TB, msg string) (depth, values int) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(msg))
	dec.UseNumber()
	var stack []bool // true: an object, whose next string is a key
	key := false
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("reference read of %q: %v", msg, err)
			}
			return depth, values
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			key = len(stack) > 0 && stack[len(stack)-1]
			continue
		}
		if _, ok := tok.(string); ok && key {
			key = false
			continue
		}
		values++
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, d == '{')
			depth = max(depth, len(stack))
			key = d == '{'
			continue
		}
		key = len(stack) > 0 && stack[len(stack)-1]
	}
}

func scanAll(msg string, lim Limits, piece int) *Scanner {
	s := &Scanner{Limits: lim}
	b := []byte(msg)
	for len(b) > 0 {
		n := min(piece, len(b))
		s.Feed(b[:n])
		b = b[n:]
	}
	return s
}

func TestScan(t *testing.T) {
	cases := []struct {
		msg        string
		method, id string
		batch      bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo \"hi\" {[,:]}"}}}`, "tools/call", "7", false},
		{`{"params":{"id":1,"method":"x"},"method":"ping","id":"a\"b"}`, "ping", `"a\"b"`, false},
		{` { "id" : -1.5e3 , "method" : "initialize" } `, "initialize", "-1.5e3", false},
		{`{"id":{"x":1},"method":["no"]}`, "", "", false},
		{`{"id":null,"method":"notifications/initialized"}`, "notifications/initialized", "", false},
		{`[{"id":1,"method":"a"},{"id":2,"method":"b"}]`, "", "", true},
		{`{"a":[[],{},[{"b":[true,false,null]}]],"id":3}`, "", "3", false},
		{`"just a string"`, "", "", false},
		{`{"aa":"","aa":{}}`, "", "", false}, // duplicate keys: both values count, as a decoder reads both
		{`{"method":"tools/call","params":{"arguments":{"id":3,"command":"` + strings.Repeat("x", 100<<10) + `"}},"jsonrpc":"2.0","id":"abc"}`, "tools/call", `"abc"`, false},
		{`{"params":{"a":"\"id\":5,"},"id" : 12 }`, "", "12", false},
		{`{"idx":1,"id":2,"methods":"no"}`, "", "2", false},
		{`{"method":"id","id":4}`, "id", "4", false},
		{`{"id":"` + strings.Repeat("x", 300) + `","method":"` + strings.Repeat("m", 200) + `"}`, "", "", false},
	}
	for _, c := range cases {
		wantDepth, wantValues := measure(t, c.msg)
		for _, piece := range []int{1, 3, 1 << 20} {
			s := scanAll(c.msg, Limits{}, piece)
			if s.Err != nil || s.Depth != wantDepth || s.Values != wantValues || s.Batch != c.batch ||
				s.Method() != c.method || string(s.ID()) != c.id {
				t.Errorf("%s (pieces of %d): depth %d values %d batch %v method %q id %q err %v; want %d %d %v %q %q",
					c.msg, piece, s.Depth, s.Values, s.Batch, s.Method(), s.ID(), s.Err, wantDepth, wantValues, c.batch, c.method, c.id)
			}
		}
	}
}

func TestScanLimits(t *testing.T) {
	wide := `{"id":9,"method":"tools/call","params":{"arguments":{` + strings.Repeat(`"k":0,`, 1000) + `"z":1}}}`
	deep := `{"method":"m","params":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `,"id":10}`
	cases := []struct {
		msg  string
		lim  Limits
		want error
	}{
		{wide, Limits{Values: 500}, ErrValues},
		{wide, Limits{Values: 5000}, nil},
		{deep, Limits{Depth: 64}, ErrDepth},
		{deep, Limits{Depth: 101}, nil},
		{strings.Repeat("[", 70), Limits{Depth: 0}, nil}, // no bound: counted, past 64 levels too
	}
	for _, c := range cases {
		s := scanAll(c.msg, c.lim, 7)
		if !errors.Is(s.Err, c.want) || (c.want == nil) != (s.Err == nil) {
			t.Errorf("%.40s... with %+v: err %v, want %v", c.msg, c.lim, s.Err, c.want)
		}
		var le *LimitError
		if c.want != nil && (!errors.As(s.Err, &le) || !strings.Contains(le.Error(), "at most")) {
			t.Errorf("error %v does not name the limit", s.Err)
		}
		// The id is known for the answer, wherever it stands.
		if c.want != nil && string(s.ID()) == "" {
			t.Errorf("%.40s...: id lost at the refusal", c.msg)
		}
	}
}

func FuzzScan(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":[1,{"b":"c"}]}}`)
	f.Add(`[{"id":"x"}]`)
	f.Add(`{"id":"\\\"","method":"\u0041"}`)
	f.Fuzz(func(t *testing.T, msg string) {
		s := scanAll(msg, Limits{}, 5)
		whole := scanAll(msg, Limits{}, len(msg)+1)
		if s.Depth != whole.Depth || s.Values != whole.Values || s.Method() != whole.Method() || string(s.ID()) != string(whole.ID()) {
			t.Fatalf("pieces change the measure of %q", msg)
		}
		if !json.Valid([]byte(msg)) {
			return
		}
		d, v := measure(t, msg)
		if s.Depth != d || s.Values != v {
			t.Fatalf("%q: depth %d values %d, want %d %d", msg, s.Depth, s.Values, d, v)
		}
		var ref struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
		}
		if json.Unmarshal([]byte(msg), &ref) == nil && len(ref.Method) > 0 && ref.Method[0] == '"' && len(ref.Method) <= MaxMethodBytes+2 {
			var want string
			json.Unmarshal(ref.Method, &want)
			var got string
			json.Unmarshal([]byte(`"`+s.Method()+`"`), &got)
			if got != want {
				t.Fatalf("%q: method %q, want %q", msg, got, want)
			}
		}
	})
}
