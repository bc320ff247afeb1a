package sdkfix

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestInputEndWaitsForEveryRequest: the end of the input is held back until every request read
// before it is answered, the SDK's id matched to the id as it stood in the text: a number and the
// string of its digits are two requests, the same number read twice two as well, and ids that are
// neither a number nor a string are not waited for.
func TestInputEndWaitsForEveryRequest(t *testing.T) {
	in := newInputEnd(time.Minute)
	for _, raw := range []string{`7`, `"7"`, `7`, `7.0`, `null`, `{}`} {
		in.read([]byte(raw))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.end()
	}()
	select {
	case <-in.ended.Done():
	case <-time.After(time.Minute):
		t.Fatal("the end of the input was not seen")
	}
	for _, v := range []any{float64(7), "7", float64(7), float64(7)} {
		select {
		case <-done:
			t.Fatalf("the end was handed on before the answer to %v", v)
		case <-time.After(20 * time.Millisecond):
		}
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		in.answered(id)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the end was still held back once every request was answered")
	}
}
