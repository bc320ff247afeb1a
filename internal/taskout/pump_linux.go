package taskout

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pump copies a task's output pipe (or its terminal's master) into its Output until EOF. After the
// main process's exit, Drain takes everything already in the pipe on the caller's goroutine, so a
// foreground command returns without waiting for EOF; processes it left behind may write on.
//
// The pipe is non-blocking. The pump's goroutine waits for it in the runtime's poller and reads under
// mu; Drain reads under the same mu until EAGAIN, so nothing is read twice or lost.
//
// Once nobody will read the output, Slow makes the pump empty the pipe only every idlePeriod,
// discarding, so that a leftover writer such as `yes &` costs ten wake-ups a second rather than a
// core. The pipe stays open (a `server &` would die of SIGPIPE) and emptied, so a chatty writer is
// held up for at most one period; a slowed pump reads with a small buffer, and a stopped one holds none.
type Pump struct {
	f    *os.File
	rc   syscall.RawConn
	out  *Output
	done chan struct{} // closed when the pump has stopped
	quit chan struct{} // closed by Abort

	// mu guards the fields that follow and every read of the pipe.
	mu     sync.Mutex
	buf    []byte // what the pipe is read into; nil once the pump has stopped
	eof    bool   // every writer is gone, or the pump was aborted: the pipe is closed
	abortd bool
	slowed bool
}

// idlePeriod is how often a slowed pump empties its pipe.
const idlePeriod = 100 * time.Millisecond

// Read buffers: a running task's output is read in large pieces; a slowed pump's is discarded, at most
// a pipe's capacity per period, and a few more reads of it cost less than the memory of an idle
// session's buffer.
const (
	bufSize     = 32 << 10
	idleBufSize = 4 << 10
)

// NewPump returns a pump of the pipe f, non-blocking, into out; Run runs it.
func NewPump(f *os.File, out *Output) (*Pump, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Pump{
		f: f, rc: rc, out: out, buf: make([]byte, bufSize),
		done: make(chan struct{}), quit: make(chan struct{}),
	}, nil
}

// Run reads until EOF or abort; the caller runs it in a goroutine it waits for.
func (p *Pump) Run() {
	defer close(p.done)
	for {
		err := p.rc.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			// false: nothing to read, wait for the poller; true: at the end, or a turn's worth read
			// (mu is let go between turns, so that drain and abort get their turn against writers
			// that never pause).
			return p.readLocked(int(fd), turnBytes)
		})
		p.mu.Lock()
		stop := p.eof || p.abortd || err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
		slowed := p.slowed
		if stop {
			p.stopLocked()
		}
		p.mu.Unlock()
		if stop {
			return
		}
		if slowed {
			p.runIdle()
			return
		}
	}
}

// runIdle empties the pipe every idlePeriod until EOF or abort.
func (p *Pump) runIdle() {
	tick := time.NewTicker(idlePeriod)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
		case <-tick.C:
		}
		p.mu.Lock()
		if !p.abortd {
			p.drainLocked()
		}
		stop := p.eof || p.abortd
		if stop {
			p.stopLocked()
		}
		p.mu.Unlock()
		if stop {
			return
		}
	}
}

// stopLocked closes the pipe and lets go of the buffer. Only the pump's goroutine calls it, as it
// returns; every other read of the pipe (drain, abort) checks eof first.
func (p *Pump) stopLocked() {
	p.eof = true
	p.f.Close()
	p.buf = nil
}

// turnBytes bounds what the running pump reads while it holds mu.
const turnBytes = 1 << 20

// maxDrain bounds what one drain reads, whatever the pipe's capacity was made (F_SETPIPE_SZ).
const maxDrain = 16 << 20

// pipeSize returns the capacity of the pipe fd (64 KiB unless the task changed it), at most
// maxDrain: what a process that has exited can have left in it.
func pipeSize(fd int) int {
	n, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil || n <= 0 {
		return 64 << 10
	}
	return min(n, maxDrain)
}

// readLocked reads until the pipe is empty (false), at its end (true, and eof is set), or budget
// bytes have been read (true): writers that never pause cannot keep it reading.
func (p *Pump) readLocked(fd, budget int) bool {
	for read := 0; read < budget; {
		n, err := unix.Read(fd, p.buf)
		if n > 0 {
			p.out.Write(p.buf[:n])
			read += n
			continue
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false
		case err != nil, n == 0:
			p.eof = true // EOF, or an error no later read will fix
			return true
		}
	}
	return true
}

// Drain reads, on the calling goroutine, what the pipe holds now: at most its capacity, which is
// all that a process that has exited can have left there, however fast processes it left behind
// write on.
func (p *Pump) Drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drainLocked()
}

func (p *Pump) drainLocked() {
	if !p.eof {
		p.rc.Control(func(fd uintptr) { p.readLocked(int(fd), pipeSize(int(fd))) })
	}
}

// WaitEnd waits, at most d, for the pump to reach the end of its input.
func (p *Pump) WaitEnd(d time.Duration) {
	select {
	case <-p.done:
	case <-time.After(d):
	}
}

// Slow makes the pump empty the pipe only every idlePeriod from now on (see pump); it does not wait.
func (p *Pump) Slow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slowed || p.eof {
		return
	}
	p.slowed = true
	// Under mu: no read is using the old buffer.
	p.buf = make([]byte, idleBufSize)
	p.f.SetReadDeadline(time.Unix(1, 0)) // in the past: takes the pump out of the poller at once
}

// Abort makes the pump stop after draining what is in the pipe, even though writers may remain (a
// process that survived its kill, in D state); it does not wait.
func (p *Pump) Abort() {
	p.Drain()
	p.mu.Lock()
	if !p.abortd {
		p.abortd = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.f.SetReadDeadline(time.Unix(1, 0)) // in the past: wakes the waiting pump at once
}

// Close closes the pipe: that of a pump that never ran (its task could not be started), or, to let go
// of it at once, one whose writers are gone; a running pump then stops.
func (p *Pump) Close() {
	p.f.Close()
}
