package main

import (
	"runtime"
	"runtime/debug"
	"time"
)

// The garbage collector keeps Go's default target: a lower GOGC cut the peak of a burst of large
// results by a tenth but cost a third more CPU per small call. What a burst leaves is returned by
// returnMemory instead.

// memoryPeriod is how often returnMemory looks at the heap.
const memoryPeriod = 2 * time.Second

// memorySlack is how much the heap may grow beyond what it held after returnMemory's previous
// return before it returns again.
const memorySlack = 8 << 20

// quietAllocs is how much allocation in a period still counts as quiet: the burst is over.
const quietAllocs = 16 << 20

// followUps is how many quiet periods after a return return again: a period can be quiet while the
// burst's last results are still being written out, and they survive that return's collection.
const followUps = 2

// returnMemory gives memory back to the kernel once a burst of large results is over, until stop is
// closed; it closes done when it returns. The Go runtime keeps the heap's goal at the burst's size
// until the next collection (up to two minutes later), and its scavenger returns only what lies
// above that goal. So every memoryPeriod, when little was allocated since the previous look and the
// heap holds more than memorySlack beyond what it held after the previous return, it collects and
// returns every free page (debug.FreeOSMemory), and again in the followUps quiet periods after that.
func returnMemory(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// runtime.ReadMemStats stops the world for a few microseconds, once per period; runtime/metrics
	// would not, but its package initialisation runs at every start of every reaper process.
	var ms runtime.MemStats
	held := func() uint64 {
		runtime.ReadMemStats(&ms)
		// The heap's objects, the rest of its spans in use, and its free spans not yet returned.
		return ms.HeapInuse + ms.HeapIdle - ms.HeapReleased
	}
	tick := time.NewTicker(memoryPeriod)
	defer tick.Stop()
	var allocs, floor uint64
	again := 0 // follow-up returns left
	for {
		select {
		case <-stop:
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
