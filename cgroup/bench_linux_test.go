package cgroup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkKill measures, for 1, 100 and 1000 sleeping processes, the time from the call to an empty
// slice: Slice.Kill without a grace period (ns/op and kill-ms), Slice.Kill with a grace period that
// the processes honour (polite-ms), and beside them the floor measured in the same run: writing
// cgroup.kill directly and polling cgroup.events until "populated 0" (floor-ms). ratio is kill-ms
// over floor-ms.
//
//	go test -run '^$' -bench BenchmarkKill -benchtime 7x ./cgroup
func BenchmarkKill(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			r := testRoot(b)
			// Orphans come back to this process, which reaps them between rounds, so that thousands of
			// exited sleeps do not wait for PID 1 (pid_max may be as low as 32768).
			unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
			b.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
			var floor, kill, polite time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := fill(b, r, fmt.Sprintf("floor-%d", i), n)
				start := time.Now()
				rawKill(b, s.Path())
				floor += time.Since(start)
				reapAll(b, s)

				s = fill(b, r, fmt.Sprintf("polite-%d", i), n)
				start = time.Now()
				if rep, err := s.Kill(context.Background(), KillOptions{Grace: 5 * time.Second}); err != nil || rep.Phase != PhasePolite {
					b.Fatalf("polite kill: %+v, %v", rep, err)
				}
				polite += time.Since(start)
				reapAll(b, s)

				s = fill(b, r, fmt.Sprintf("kill-%d", i), n)
				b.StartTimer()
				start = time.Now()
				if _, err := s.Kill(context.Background(), KillOptions{}); err != nil {
					b.Fatal(err)
				}
				kill += time.Since(start)
				b.StopTimer()
				reapAll(b, s)
				b.StartTimer()
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
			b.ReportMetric(ms(floor), "floor-ms")
			b.ReportMetric(ms(kill), "kill-ms")
			b.ReportMetric(ms(polite), "polite-ms")
			b.ReportMetric(float64(kill)/float64(floor), "ratio")
		})
	}
}

// fill creates a slice holding exactly n sleeping processes.
func fill(b *testing.B, r *Root, name string, n int) *Slice {
	b.Helper()
	s, err := r.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	spawn(b, s, "i=1; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 1000 & i=$((i+1)); done; echo ready; exec sleep 1000", 0)
	waitPids(b, s, n)
	// The kernel defers a cgroup.events notification that comes within 10 ms of the previous one (the
	// one for "populated 1"); let that window pass so that the floor measures the kill, not the
	// rate limit.
	time.Sleep(2 * notifyInterval)
	return s
}

// rawKill is the floor: one write to cgroup.kill and a poll on cgroup.events until "populated 0",
// with none of Slice.Kill's listing, reporting or fallbacks.
func rawKill(b *testing.B, dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 64)
	for {
		n, _ := unix.Pread(fd, buf, 0)
		if bytes.Contains(buf[:n], []byte("populated 0")) {
			return
		}
		unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}, 10000)
	}
}

// reapAll waits for the killed processes (this process is their subreaper) and removes the slice.
func reapAll(b *testing.B, s *Slice) {
	for {
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	if err := s.Remove(); err != nil {
		b.Fatal(err)
	}
}
