package kill

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

// BenchmarkKill measures, for 1, 100 and 1000 sleeping processes in a leaf of a slice (as a session's
// task leaves them), the hard kill of a teardown (Policy.Slice: the strongest kill the kernel offers,
// then a wait until the slice is empty), beside the floor measured in the same run on an identical
// slice: one write to cgroup.kill and a poll until cgroup.events reads "populated 0". ratio is kill
// over floor.
//
//	go test -run '^$' -bench BenchmarkKill -benchtime 7x ./internal/kill
func BenchmarkKill(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			root, _, method := testSlice(b)
			p := Policy{Method: method}
			var floor, kill time.Duration
			for i := range b.N {
				b.StopTimer()
				s := sleepers(b, root, fmt.Sprintf("floor-%d", i), n)
				start := time.Now()
				testutil.RawKill(b, s.Path())
				floor += time.Since(start)

				s = sleepers(b, root, fmt.Sprintf("kill-%d", i), n)
				b.StartTimer()
				start = time.Now()
				left, err := p.Slice(context.Background(), s, time.Now().Add(time.Minute))
				kill += time.Since(start)
				b.StopTimer()
				if err != nil || len(left) > 0 {
					b.Fatalf("Slice: %v left, %v", left, err)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			b.ReportMetric(ms(floor), "floor-ms")
			b.ReportMetric(ms(kill), "kill-ms")
			b.ReportMetric(float64(kill)/float64(floor), "ratio")
		})
	}
}

// sleepers returns a new slice below root whose leaf holds n sleeping processes (n-1 and the shell
// that started them).
func sleepers(b *testing.B, root *cgroup.Root, name string, n int) *cgroup.Slice {
	b.Helper()
	s := create(b, root, name)
	leaf, err := s.Create("l-1")
	if err != nil {
		b.Fatal(err)
	}
	start(b, leaf, "i=1; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 1000 & i=$((i+1)); done; exec sleep 1000")
	// A shell forks about a thousand of them a second; give a loaded machine five times as long.
	deadline := time.Now().Add(max(30*time.Second, time.Duration(n)*5*time.Millisecond))
	for {
		pids, _ := s.Pids()
		if len(pids) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d processes started", len(pids), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// cgroup.events notifications come at most every 10 ms; let the one for "populated 1" pass.
	time.Sleep(20 * time.Millisecond)
	return s
}
