package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestGuardWatchedAfterHurry: a second signal (which cancels hurry) does not end the watch of the
// guard, so the guard's death still arms the last resort of a shutdown stuck after it. The test runs
// itself again as a guarded server would run: a child of a real process (sh) named to watchSignals
// as the guard's environment names it; the child hurries, the test kills the sh, and the child must
// see it gone.
func TestGuardWatchedAfterHurry(t *testing.T) {
	if os.Getenv("REAPER_TEST_GUARDED_CHILD") == "1" {
		guardedChild()
		return
	}
	cmd := exec.Command("sh", "-c", `"$@" & wait`, "sh", os.Args[0], "-test.run=^TestGuardWatchedAfterHurry$")
	cmd.Env = append(os.Environ(), "REAPER_TEST_GUARDED_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := -1 // a pidfd of the test's own child's child, once it has said its pid
	lines := make(chan string)
	t.Cleanup(func() {
		cmd.Process.Kill()
		if child >= 0 { // through its pidfd: once it has exited, its pid may be another process's
			unix.PidfdSendSignal(child, unix.SIGKILL, nil, 0)
			unix.Close(child)
		}
		cmd.Wait()        // closes the pipe: the reader below ends
		for range lines { // and closes lines
		}
	})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	deadline := time.After(testutil.Slow(60 * time.Second))
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the guarded child ended without a word")
			}
			switch {
			case strings.HasPrefix(l, "pid "):
				pid, _ := strconv.Atoi(strings.TrimPrefix(l, "pid "))
				if child, err = unix.PidfdOpen(pid, 0); err != nil {
					t.Fatalf("the guarded child %d: %v", pid, err)
				}
			case l == "hurried":
				time.Sleep(200 * time.Millisecond)
				cmd.Process.Kill() // the guard dies
			case l == "guard gone seen":
				return
			case strings.HasPrefix(l, "FAIL:"):
				t.Fatal(l)
			}
		case <-deadline:
			t.Fatalf("the guarded child said nothing for %v", testutil.Slow(60*time.Second))
		}
	}
}

// guardedChild is TestGuardWatchedAfterHurry's child: its parent is its guard.
func guardedChild() {
	_, w, err := os.Pipe()
	if err != nil {
		fmt.Println("FAIL:", err)
		return
	}
	env := map[string]string{guard.EnvPid: strconv.Itoa(os.Getppid()), guard.EnvFD: strconv.Itoa(int(w.Fd()))}
	link, err := guard.LinkFrom(func(k string) string { return env[k] })
	if err != nil {
		fmt.Println("FAIL:", err)
		return
	}
	s := watchSignals(slog.New(slog.NewTextHandler(io.Discard, nil)), link)
	defer s.stop()
	fmt.Println("pid", os.Getpid())
	s.cancelHurry() // what a second signal does
	fmt.Println("hurried")
	select {
	case <-s.guardGone:
		fmt.Println("guard gone seen")
	case <-time.After(testutil.Slow(30 * time.Second)):
		fmt.Println("FAIL: the guard's death was not seen after a hurry")
	}
}
