package main

import (
	"runtime"
	"runtime/debug"
	"time"
)

// The garbage collector keeps Go's default target (GOGC=100, or what the environment sets). A target
// of 50 lowered the peak of 16 concurrent calls of 1 MB output by 10-15% (65-90 MiB against 69-102
// MiB, both far below the bound the README states) but cost 0.6 ms more CPU per `echo hi` call (2.6
// against 1.95 ms; BenchmarkMemory and BenchmarkRoundTrip in test/e2e): collections of a small heap
// came twice as often. What a burst leaves is returned by memoryReturner instead.

// memoryPeriod is how often memoryReturner looks at the heap.
const memoryPeriod = 2 * time.Second

// memorySlack is how much the heap may grow beyond what it held after memoryReturner's previous
// return before it returns again.
const memorySlack = 8 << 20

// quietAllocs is how much allocation in a period still counts as quiet: the burst is over.
const quietAllocs = 16 << 20

// followUps is how many quiet periods after a return return again. A period can be quiet while the
// burst's last results are still being written out: they survive that return's collection, and the
// heap, which then does not grow past what it held after it, would keep them as garbage until the
// next collection (in TestMemoryBound over HTTP, one run in five settled at 31-41 MiB against 13-23).
const followUps = 2

// memoryReturner gives memory back to the kernel once a burst of large results is over. The Go runtime
// keeps what a burst made it map: until the next collection (at the latest two minutes later) the
// heap's goal stays at the burst's size, and its background scavenger returns only what lies above
// that goal. So every memoryPeriod, when little was allocated since the previous look (the burst is
// over) and the heap holds more than memorySlack beyond what it held after the previous return, it
// collects and returns every free page (debug.FreeOSMemory): a full collection of a heap of a few
// megabytes, a millisecond or two, at most once per period and only after the heap grew, and again
// in the followUps quiet periods after that.
type memoryReturner struct {
	stop chan struct{}
	done chan struct{}
}

// startMemoryReturner starts the returner; stop it with Stop.
func startMemoryReturner() *memoryReturner {
	m := &memoryReturner{stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *memoryReturner) run() {
	defer close(m.done)
	// runtime.ReadMemStats stops the world for a few microseconds, once per period; runtime/metrics
	// would not, but its package initialisation runs at every start of every reaper process.
	var ms runtime.MemStats
	held := func() uint64 {
		runtime.ReadMemStats(&ms)
		// What the heap holds mapped and not returned: its objects, the rest of its spans in use,
		// and its free spans not yet returned to the kernel.
		return ms.HeapInuse + ms.HeapIdle - ms.HeapReleased
	}
	tick := time.NewTicker(memoryPeriod)
	defer tick.Stop()
	var allocs, floor uint64
	again := 0 // follow-up returns left
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		now := held()
		quiet := ms.TotalAlloc-allocs < quietAllocs
		allocs = ms.TotalAlloc
		if !quiet {
			continue
		}
		switch {
		case now > floor+memorySlack:
			again = followUps
		case again > 0:
			again--
		default:
			continue
		}
		debug.FreeOSMemory()
		floor = held()
	}
}

// Stop stops the returner and waits for it.
func (m *memoryReturner) Stop() {
	close(m.stop)
	<-m.done
}
