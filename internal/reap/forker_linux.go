package reap

import "runtime"

// Forker runs functions, forks above all, on one OS thread that nothing else runs on and that lives
// until Stop. Linux ties two things to the thread that forks a child rather than to the process: the
// child's parent-death signal fires when that thread exits (and Go ends threads as it pleases), and a
// child inherits that thread's no_new_privs flag and capabilities. A Forker gives such forks a thread
// whose state is known and whose life is the owner's.
type Forker struct {
	calls chan func()
	done  chan struct{}
}

// StartForker starts the thread and runs setup on it first (set a per-thread flag, say); it returns
// setup's error, with the thread already gone, if setup fails. A nil setup does nothing.
func StartForker(setup func() error) (*Forker, error) {
	f := &Forker{calls: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(f.done)
		// Never unlocked: the thread ends with the goroutine, and no other goroutine runs on it.
		runtime.LockOSThread()
		if setup != nil {
			if err := setup(); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		for call := range f.calls {
			call()
		}
	}()
	if err := <-ready; err != nil {
		<-f.done
		return nil, err
	}
	return f, nil
}

// Run runs fn on the thread and returns when it has. Calls from several goroutines take turns.
func (f *Forker) Run(fn func()) {
	done := make(chan struct{})
	f.calls <- func() { fn(); close(done) }
	<-done
}

// Stop ends the thread and waits for it. No Run may follow.
func (f *Forker) Stop() {
	close(f.calls)
	<-f.done
}
