package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/reaper"
)

// shutdownSignals end reaper in order: every session is torn down (SIGTERM, grace, kill), then reaper
// exits; a second one cuts the grace periods short. The faults among them count only when sent by
// kill(2): a real fault still crashes the program, and the guard cleans up after it.
var shutdownSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGPWR, syscall.SIGXCPU,
	syscall.SIGABRT, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGSEGV, syscall.SIGSYS, syscall.SIGTRAP,
}

// ignoredSignals would end reaper by their default action, and mean nothing to it: SIGPIPE above all
// (a write to a closed stdout or stderr then fails with EPIPE instead), and SIGSTKFLT, which Go's
// runtime takes for a crash. Handled, not ignored, so that tasks get them reset to their default.
// Go's runtime drops USR1, USR2, ALRM, VTALRM, IO and XFSZ by itself unless a program asks for them.
var ignoredSignals = []os.Signal{syscall.SIGPIPE, syscall.SIGSTKFLT}

// runSignals are the signals beyond shutdownSignals that reaper run's guard forwards to its server,
// which passes them on to the job (job.ForwardedSignals).
var runSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// signals turns shutdown signals into two contexts: the first signal cancels serving (sessions are
// torn down gracefully) and cuts short the teardowns already under way; a second one cancels hurry,
// which cuts every grace period short. When the guard dies, both are cancelled at once. The guard is
// watched until stop, whatever the signals did.
type signals struct {
	log         *slog.Logger
	guard       guard.Link
	died        sync.Once
	guardGone   chan struct{} // closed when the guard has died
	serving     context.Context
	stopServing context.CancelFunc
	hurry       context.Context
	cancelHurry context.CancelFunc
	ch          chan os.Signal
	asked       chan struct{}      // closed once every handled signal is asked for (see watchSignals)
	stopWatch   context.CancelFunc // ends the guard watcher; only stop calls it
	wg          sync.WaitGroup     // the signal watcher and the guard watcher

	// mu guards the field that follows.
	mu       sync.Mutex
	underWay func() // cuts short the teardowns under way; nil until there is a server
}

// watchSignals starts watching every signal that would end reaper by default. Call it first thing:
// until then a log line written to a closed stderr kills the program. SIGPIPE is asked for before
// it returns, the others by a goroutine while the start-up goes on, off the path a stdio client
// waits on; until then a shutdown signal ends the server by its default action, and the guard
// cleans up after it.
func watchSignals(log *slog.Logger, link guard.Link) *signals {
	s := &signals{log: log, guard: link, ch: make(chan os.Signal, 8), asked: make(chan struct{}), guardGone: make(chan struct{})}
	s.serving, s.stopServing = context.WithCancel(context.Background())
	s.hurry, s.cancelHurry = context.WithCancel(context.Background())
	watching, stopWatch := context.WithCancel(context.Background())
	s.stopWatch = stopWatch
	signal.Notify(s.ch, syscall.SIGPIPE)
	go func() {
		defer close(s.asked)
		signal.Notify(s.ch, handledSignals()...)
	}()
	s.wg.Add(2)
	go s.watch(log, link)
	go func() {
		defer s.wg.Done()
		if link.WaitGone(watching) {
			s.guardDied()
		}
	}()
	return s
}

// guardDied ends everything at once.
func (s *signals) guardDied() {
	s.died.Do(func() {
		s.log.Warn("the guard died: killing every session's processes now", "guard", s.guard.Pid)
		close(s.guardGone)
		s.hurryUnderWay()
		s.stopServing()
		s.cancelHurry()
	})
}

// onSignal sets what cuts short the teardowns under way.
func (s *signals) onSignal(underWay func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.underWay = underWay
}

func (s *signals) hurryUnderWay() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.underWay != nil {
		s.underWay()
	}
}

func (s *signals) watch(log *slog.Logger, link guard.Link) {
	defer s.wg.Done()
	first := true
	for {
		var sig os.Signal
		select {
		case sig = <-s.ch:
		case <-s.hurry.Done():
			return
		}
		switch {
		case isIgnored(sig):
			if sig != syscall.SIGPIPE {
				log.Info("signal ignored", "signal", sig.String())
			}
		case sig == guard.Signal && link.Gone():
			s.guardDied()
		case first:
			log.Info("shutting down: every session's processes are being killed", "signal", sig.String())
			notify(log, "STOPPING=1")
			s.hurryUnderWay()
			s.stopServing()
			first = false
		default:
			log.Warn("second signal: killing without waiting for the grace period", "signal", sig.String())
			s.hurryUnderWay()
			s.cancelHurry()
		}
	}
}

func isIgnored(sig os.Signal) bool { return slices.Contains(ignoredSignals, sig) }

// handledSignals are the signals reaper asks to receive: those that end it and those it ignores
// (which its guard forwards all of), and extra (reaper run's forwarded ones).
func handledSignals(extra ...os.Signal) []os.Signal {
	return slices.Concat(extra, shutdownSignals, ignoredSignals)
}

// lastResort bounds the shutdown after the guard died, and hurriedLastResort after a second signal
// (a hurried shutdown takes milliseconds to a second): past them the server kills everything below
// it, removes its slice and its state directory (the dead guard cannot), and exits, so that a stuck
// teardown does not keep every other session's processes alive.
const (
	lastResort        = 3 * time.Second
	hurriedLastResort = 5 * time.Second
)

// watchdog starts the last resort for r and returns the function that stops it, which must run
// before stop (which cancels hurry). It is armed by the hurry and fires hurriedLastResort after it,
// or lastResort after the guard's death if that comes first.
func (s *signals) watchdog(r *reaper.Reaper, log *slog.Logger) (stop func()) {
	finished := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-s.hurry.Done():
		case <-finished:
			return
		}
		hurried := time.NewTimer(hurriedLastResort)
		defer hurried.Stop()
		var orphaned <-chan time.Time // lastResort after the guard's death, once it has died
		guardGone := s.guardGone      // guardDied closes it before it hurries
		for {
			select {
			case <-guardGone:
				guardGone = nil
				t := time.NewTimer(lastResort)
				defer t.Stop()
				orphaned = t.C
				continue
			case <-orphaned:
				log.Error("the guard is gone and the shutdown is stuck: killing every process, removing the instance's slice and state, and exiting", "after", lastResort)
			case <-hurried.C:
				log.Error("the hurried shutdown is stuck: killing every process, removing the instance's slice and state, and exiting", "after", hurriedLastResort)
			case <-finished:
				return
			}
			if err := r.Abandon(); err != nil {
				log.Error("the instance's slice or state is left for the next start's sweep or reaper sweep", "error", err)
			}
			os.Exit(1)
		}
	}()
	return func() {
		close(finished)
		<-done
	}
}

// stop ends the watch and waits for its goroutines.
func (s *signals) stop() {
	<-s.asked
	signal.Stop(s.ch)
	s.stopServing()
	s.cancelHurry()
	s.stopWatch()
	s.wg.Wait()
}
