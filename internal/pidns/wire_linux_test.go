package pidns

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// TestInitRefusesGarbage: a request that breaks the protocol ends the init (and so its namespace): it takes orders from the server only, and a server that sends garbage
// is not one.
func TestInitRefusesGarbage(t *testing.T) {
	good, _, _ := encodeSpawn(1, Request{Argv: []string{"/bin/true"}, FDs: fdsOf(os.Stdin)})
	term, _ := encodeSignal(1, []unix.Signal{unix.SIGTERM})
	var badSig encoder // signal 0 is no signal: kill(-1, 0) would only probe
	badSig.U64(1)
	badSig.U32(1)
	badSig.U32(0)
	cases := map[string]func(c *sock) error{
		"unknown type":         func(c *sock) error { return c.Send(9, 0, nil, nil) },
		"descriptors missing":  func(c *sock) error { return c.Send(msgSpawn, 0, good, nil) },
		"too many descriptors": func(c *sock) error { return c.Send(msgSpawn, 0, good, []int{0, 0}) },
		"a cut request":        func(c *sock) error { return c.Send(msgSpawn, 0, good[:len(good)-1], []int{0}) },
		"descriptors late": func(c *sock) error {
			return errors.Join(c.Send(msgSpawn, flagMore, nil, nil), c.Send(msgSpawn, 0, good, []int{0}))
		},
		"a request too large": func(c *sock) error {
			return c.SendChunked(msgSpawn, make([]byte, maxRequest+1), nil)
		},
		"a datagram over a chunk":    func(c *sock) error { return c.Send(msgSpawn, 0, make([]byte, maxChunk+1), nil) },
		"a signal with a descriptor": func(c *sock) error { return c.Send(msgSignal, 0, term, []int{0}) },
		"signal 0":                   func(c *sock) error { return c.Send(msgSignal, 0, badSig.b, nil) },
		"a cut signal request":       func(c *sock) error { return c.Send(msgSignal, 0, term[:len(term)-1], nil) },
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			in := startInit(t)
			in.sendMu.Lock()
			err := bad(in.conn)
			in.sendMu.Unlock()
			// The init may be gone before the last chunk: EPIPE, or ECONNRESET where it left chunks
			// unread.
			if err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
				t.Fatal(err)
			}
			if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
				t.Fatal("the init took garbage and lives on")
			}
			if st := in.status; st.Code() != 1 {
				t.Errorf("the init exited %d, want 1 (a protocol error)", st.Code())
			}
		})
	}
}

// TestServerRefusesGarbage: an init that breaks the protocol (a root task may ptrace its init) is
// cut off and killed; the spawns waiting on it fail, and nothing it says is believed.
func TestServerRefusesGarbage(t *testing.T) {
	sleeper := exec.Command("/bin/sleep", "1000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	pidfd, err := unix.PidfdOpen(sleeper.Process.Pid, 0)
	if err != nil {
		t.Skipf("skipped: no pidfds: %v", err)
	}
	defer unix.Close(pidfd)
	var lie encoder // an answer naming another pid than the pidfd's
	lie.U64(1)
	lie.U64(uint64(os.Getpid()))
	lie.U64(2)
	lie.U64(3)
	var exit encoder
	exit.U64(1)
	exit.U32(0)
	exit.U32(0)
	cases := map[string]func(c *sock) error{
		"a message over the bound":  func(c *sock) error { return c.Send(msgExit, 0, make([]byte, maxReply+1), nil) },
		"unknown type":              func(c *sock) error { return c.Send(77, 0, nil, nil) },
		"flags":                     func(c *sock) error { return c.Send(msgExit, flagMore, exit.b, nil) },
		"an answer without a pidfd": func(c *sock) error { return c.Send(msgSpawned, 0, lie.b, nil) },
		"an exit with a descriptor": func(c *sock) error { return c.Send(msgExit, 0, exit.b, []int{pidfd}) },
		"a lie about the pid":       func(c *sock) error { return c.Send(msgSpawned, 0, lie.b, []int{pidfd}) },
		"a second hello":            func(c *sock) error { return c.Send(msgHello, 0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, nil) },
		"a signal answer with a descriptor": func(c *sock) error {
			return c.Send(msgSignaled, 0, make([]byte, 12), []int{pidfd})
		},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			server, err := newSock(pair[0], "server")
			if err != nil {
				t.Fatal(err)
			}
			peer, err := newSock(pair[1], "fake init")
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			in := &Init{conn: server, pid: -1, pidfd: -1, timeout: 5 * time.Second, stop: make(chan struct{}),
				done: make(chan struct{}), calls: map[uint64]*call{}, exited: make(chan reap.Exit)}
			c := &call{reply: make(chan reply, 1), exit: make(chan reap.Exit, 1)}
			in.calls[1] = c
			go in.read()
			defer in.Close()
			if err := bad(peer); err != nil {
				t.Fatal(err)
			}
			select {
			case rep := <-c.reply:
				if !errors.Is(rep.err, ErrProtocol) || !errors.Is(rep.err, ErrEnded) {
					t.Errorf("the waiting spawn got %+v, want a protocol error", rep)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiting spawn got nothing")
			}
			if err := in.Err(); !errors.Is(err, ErrProtocol) {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}
