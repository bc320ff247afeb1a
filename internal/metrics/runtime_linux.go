package metrics

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// The Go runtime's and the process's own metrics, read at each scrape under the names Prometheus's
// Go client gives them, so that dashboards made for Go programs work unchanged: the common ones, not
// every one that library's collectors show (the package documentation says why it is not linked).

// runtimeFamilies reads the Go runtime's and the process's metrics. What cannot be read is left out:
// a scrape never fails for it. The runtime's come from runtime.ReadMemStats, which stops the world for
// a few microseconds: runtime/metrics would say the same, but its package initialisation (its
// descriptions of every GODEBUG setting) runs in every reaper process, the guard and the sessions'
// inits included, at each start.
func (m *Metrics) runtimeFamilies() []*family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fams := []*family{
		constGauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		constGauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc)),
		constGauge("go_memstats_sys_bytes", "Number of bytes obtained from the system.", float64(ms.Sys)),
		constGauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0))),
	}
	info := newFamily("go_info", "Information about the Go environment.", gauge, []string{"version"}, nil)
	info.set(1, runtime.Version())
	fams = append(fams, info)
	return append(fams, m.processFamilies()...)
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on every Linux architecture Go
// supports.
const userHZ = 100

// processFamilies reads the process_* metrics from /proc/self (the kernel's, about this process).
func (m *Metrics) processFamilies() []*family {
	var fams []*family
	if st, ok := readSelfStat(); ok {
		fams = append(fams,
			constCounter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", float64(st.utime+st.stime)/userHZ),
			constGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize)),
			constGauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss*uint64(os.Getpagesize()))),
			constGauge("go_threads", "Number of OS threads of the process.", float64(st.threads)))
		if start := m.startTime(st.starttime); start > 0 {
			fams = append(fams, constGauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", start))
		}
	}
	if n, err := openFDs(); err == nil {
		fams = append(fams, constGauge("process_open_fds", "Number of open file descriptors.", float64(n)))
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		fams = append(fams, constGauge("process_max_fds", "Maximum number of open file descriptors.", float64(rl.Cur)))
	}
	return fams
}

// startTime returns the process's start in seconds since the epoch, from its start in clock ticks
// after boot and the boot time in /proc/stat, read once; 0 if that cannot be read.
func (m *Metrics) startTime(ticks uint64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.start == 0 {
		if boot, ok := bootTime(); ok {
			m.start = float64(boot) + float64(ticks)/userHZ
		}
	}
	return m.start
}

// selfStat is what processFamilies uses of /proc/self/stat.
type selfStat struct {
	utime, stime, starttime, vsize, rss uint64
	threads                             int
}

// readSelfStat parses /proc/self/stat. The fields are counted after the last ')', which ends the
// command name (itself free to hold spaces and parentheses).
func readSelfStat() (selfStat, bool) {
	b, err := readBounded("/proc/self/stat", 4096)
	if err != nil {
		return selfStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return selfStat{}, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, state
	if len(f) < 22 {
		return selfStat{}, false
	}
	num := func(field int) uint64 { // field as proc(5) numbers them
		n, _ := strconv.ParseUint(string(f[field-3]), 10, 64)
		return n
	}
	return selfStat{utime: num(14), stime: num(15), threads: int(num(20)), starttime: num(22), vsize: num(23), rss: num(24)}, true
}

// bootTime reads the btime line of /proc/stat: the boot time in seconds since the epoch.
func bootTime() (uint64, bool) {
	b, err := readBounded("/proc/stat", 1<<20)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// openFDs counts the entries of /proc/self/fd (the one this count opens among them, as Prometheus's
// Go client counts it).
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(1024)
		n += len(names)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// readBounded reads at most max bytes of a file.
func readBounded(file string, max int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
