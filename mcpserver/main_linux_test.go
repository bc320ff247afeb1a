package mcpserver

import (
	"testing"

	"github.com/cgreaper/reaper/internal/testutil"
)

// TestMain lets this test binary be the init of a session's PID namespace: the Reapers the tests make
// run their own program as that.
func TestMain(m *testing.M) { testutil.Main(m, nil) }
