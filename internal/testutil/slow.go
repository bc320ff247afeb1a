package testutil

import (
	"os"
	"strconv"
	"time"
)

// SlowVar names the environment variable that stretches the tests' deadlines on a slow machine by a
// factor: the VM lane (test/vm) sets it for guests on an emulated CPU, where starting a process costs
// tens of times what it does here. Deadlines stretch; what the tests assert (counts, memory, that
// every process died) does not change.
const SlowVar = "REAPER_TEST_SLOW"

// Slow returns the deadline d stretched by the factor in $REAPER_TEST_SLOW (unset, unreadable or
// below 1: d itself).
func Slow(d time.Duration) time.Duration {
	f, err := strconv.ParseFloat(os.Getenv(SlowVar), 64)
	if err != nil || f <= 1 {
		return d
	}
	return time.Duration(float64(d) * f)
}
