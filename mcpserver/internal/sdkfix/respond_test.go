package sdkfix

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResponseLine: a response with a result comes out of responseLine as the SDK encodes it, byte
// for byte, whatever its id and its result hold; an error or a response without a result is left to
// the SDK.
func TestResponseLine(t *testing.T) {
	weird := `"<a href=\"x\">&amp;</a>\t\u2028 é 漢 \ud83d\ude00 \\"`
	results := []string{`{}`, `{"content":[{"type":"text","text":` + weird + `}]}`, `null`, `"` + strings.Repeat("~", 1<<20) + `"`}
	ids := []any{int64(0), int64(-7), int64(1) << 53, "", "s-1", "<&>", "é\"\\"}
	for _, idv := range ids {
		id, err := jsonrpc.MakeID(asDecoded(idv))
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range results {
			resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(res)}
			want, err := jsonrpc.EncodeMessage(resp)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := responseLine(resp)
			if !ok || string(got) != string(want)+"\n" {
				t.Errorf("id %v, result %.40q: responseLine = %.120q (%v), the SDK writes %.120q", idv, res, got, ok, want)
			}
		}
	}
	id, _ := jsonrpc.MakeID(float64(1))
	for _, resp := range []*jsonrpc.Response{
		{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}},
		{ID: id, Result: json.RawMessage(`{}`), Error: errors.New("both")},
		{ID: id},
		{Result: json.RawMessage(`{}`)},
	} {
		if line, ok := responseLine(resp); ok {
			t.Errorf("responseLine wrote %q for %+v, which the SDK must write", line, resp)
		}
	}
}

// asDecoded is an id as JSON decoding gives it, which is what jsonrpc.MakeID takes.
func asDecoded(v any) any {
	if n, ok := v.(int64); ok {
		return float64(n)
	}
	return v
}

var _ mcp.Connection = (*responseConn)(nil)
