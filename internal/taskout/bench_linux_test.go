package taskout

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logLines returns n bytes of log-like output: lines of about 80 bytes, one in a thousand an error.
func logLines(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		if i%1000 == 999 {
			fmt.Fprintf(&b, "2026-12-07T10:00:%02d.%06d ERROR worker %d: connection reset by peer (retrying)\n", i%60, i, i%17)
		} else {
			fmt.Fprintf(&b, "2026-12-07T10:00:%02d.%06d INFO worker %d: handled request %d in %d ms\n", i%60, i, i%17, i, i%300)
		}
	}
	return b.Bytes()[:n]
}

// BenchmarkGrep64MiB greps an ended output of 64 MiB (the default budget, in its file) for an error
// string, as task_output does, beside the floor any line grep has to pay in the same run: the same
// pattern over the same bytes in memory, split into lines, with no file, view or limit (floor), and
// GNU grep over the file where there is one. Figures are MB/s of output searched; "lines" counts the
// matches (the same for all).
func BenchmarkGrep64MiB(b *testing.B) {
	const size = 64 << 20
	data := logLines(size)
	st := storeWith(b, Options{Budget: size})
	o := st.New("big.out")
	o.Write(data)
	o.End()
	path := o.File().Path
	for _, expr := range []string{`ERROR`, `(?i)error|warn|fail`} {
		p := mustCompile(b, expr)
		b.Run(fmt.Sprintf("pattern=%s/taskout", expr), func(b *testing.B) {
			b.SetBytes(size)
			var lines int
			for b.Loop() {
				c, err := o.Grep(context.Background(), offset(0), false, p, Budget{Chars: 1 << 20})
				if err != nil || c.Pending != 0 || c.Stopped != "" {
					b.Fatalf("%+v %v", c.Stopped, err)
				}
				lines = c.Lines
			}
			b.ReportMetric(float64(lines), "lines")
		})
		b.Run(fmt.Sprintf("pattern=%s/floor", expr), func(b *testing.B) {
			b.SetBytes(size)
			var lines int
			for b.Loop() {
				lines = 0
				for rest := data; len(rest) > 0; {
					i := bytes.IndexByte(rest, '\n')
					if i < 0 {
						i = len(rest) - 1
					}
					if p.re.Match(rest[:i]) {
						lines++
					}
					rest = rest[i+1:]
				}
			}
			b.ReportMetric(float64(lines), "lines")
		})
		grep, err := exec.LookPath("grep")
		if err != nil {
			continue
		}
		b.Run(fmt.Sprintf("pattern=%s/gnu-grep", expr), func(b *testing.B) {
			b.SetBytes(size)
			args := []string{"-c", "-E", expr, path}
			if strings.HasPrefix(expr, "(?i)") {
				args = []string{"-c", "-i", "-E", strings.TrimPrefix(expr, "(?i)"), path}
			}
			var out []byte
			for b.Loop() {
				if out, err = exec.Command(grep, args...).Output(); err != nil {
					b.Fatal(err)
				}
			}
			var lines int
			fmt.Sscan(string(out), &lines)
			b.ReportMetric(float64(lines), "lines")
		})
	}
}

// BenchmarkWriteDuringGrep measures what a slow grep costs the task's writes: the longest a write of
// the output (the pump's) waits while a grep searches 8 MiB with a slow pattern, beside the same
// writes with no grep under way.
func BenchmarkWriteDuringGrep(b *testing.B) {
	for _, grep := range []bool{false, true} {
		b.Run(fmt.Sprintf("grep=%v", grep), func(b *testing.B) {
			st := storeWith(b, Options{Budget: 64 << 20, ScanTime: time.Hour})
			o := st.New("w.out")
			fill(o, 8<<10, 1<<10) // 8 MiB of lines of a's, a millisecond and more each
			slow := mustCompile(b, slowPattern)
			chunk := bytes.Repeat([]byte("b"), 32<<10)
			var worst time.Duration
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				if grep {
					go func() {
						defer close(done)
						o.Grep(ctx, offset(0), true, slow, Budget{})
					}()
					time.Sleep(20 * time.Millisecond) // under way
				} else {
					close(done)
				}
				for range 100 {
					t0 := time.Now()
					o.Write(chunk)
					worst = max(worst, time.Since(t0))
				}
				cancel()
				<-done
			}
			b.ReportMetric(float64(worst.Microseconds()), "worst-write-µs")
		})
	}
}

// BenchmarkPatternCost measures, in CPU time, what patterns built to be slow cost per byte of text
// and unit of their cost (see Compile): the constant behind MaxPatternCost. Each runs over a 64 KiB
// line it does not match, of the text it is slowest on of three.
func BenchmarkPatternCost(b *testing.B) {
	texts := [][]byte{
		bytes.Repeat([]byte("a"), 64<<10),
		bytes.Repeat([]byte("aaaaaaaaab"), 6600)[:64<<10],
		logLines(64 << 10),
	}
	for _, expr := range []string{
		`(?i)error|warn|fail`, `.*.*.*.*=.*`, `[\p{L}\p{N}]{80}z`, strings.Repeat(`(?:\w?\d?\s?)`, 40) + "z",
		strings.Repeat(`(?:[ab]?)`, 400) + "$z", `(?i)(?:a|aa|aaa|b|ab|ba)*z`, `(.*a){30}z`, `\pL{100}z`,
		`(?s).{300}z`, `[^\n]{400}z`, `(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p){60}z`, `(?:a*)*(?:b*)*(?:a*)*z`,
	} {
		p := mustCompile(b, expr)
		b.Run(fmt.Sprintf("cost=%d/%.24s", p.Cost(), expr), func(b *testing.B) {
			var worst float64
			for b.Loop() {
				for _, text := range texts {
					runtime.LockOSThread()
					c0 := threadCPU()
					p.re.Match(text)
					ns := float64(threadCPU() - c0)
					runtime.UnlockOSThread()
					worst = max(worst, ns/float64(len(text))/float64(p.Cost()))
				}
			}
			b.ReportMetric(worst, "cpu-ns/byte/cost")
		})
	}
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(os.NewSyscallError("clock_gettime", err))
	}
	return time.Duration(ts.Nano())
}
