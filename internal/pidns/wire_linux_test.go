package pidns

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/pidwire"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// TestInitRefusesGarbage: a request that breaks the protocol ends the init, the Go one or the small
// one (and so its namespace): it takes orders from the server only, and a server that sends garbage
// is not one.
func TestInitRefusesGarbage(t *testing.T) {
	good, _, _ := pidwire.EncodeSpawn(1, Request{Argv: []string{"/bin/true"}, FDs: fdsOf(os.Stdin)})
	term, _ := pidwire.EncodeSignal(1, []unix.Signal{unix.SIGTERM})
	var badSig pidwire.Encoder // signal 0 is no signal: kill(-1, 0) would only probe
	badSig.U64(1)
	badSig.U32(1)
	badSig.U32(0)
	cases := map[string]func(c *pidwire.Conn) error{
		"unknown type":         func(c *pidwire.Conn) error { return c.Send(9, 0, nil, nil) },
		"descriptors missing":  func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawn, 0, good, nil) },
		"too many descriptors": func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawn, 0, good, []int{0, 0}) },
		"a cut request":        func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawn, 0, good[:len(good)-1], []int{0}) },
		"descriptors late": func(c *pidwire.Conn) error {
			return errors.Join(c.Send(pidwire.MsgSpawn, pidwire.FlagMore, nil, nil), c.Send(pidwire.MsgSpawn, 0, good, []int{0}))
		},
		"a request too large": func(c *pidwire.Conn) error {
			return c.SendChunked(pidwire.MsgSpawn, make([]byte, pidwire.MaxRequest+1), nil)
		},
		"a datagram over a chunk":    func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawn, 0, make([]byte, pidwire.MaxChunk+1), nil) },
		"a signal with a descriptor": func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSignal, 0, term, []int{0}) },
		"signal 0":                   func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSignal, 0, badSig.Bytes(), nil) },
		"a cut signal request":       func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSignal, 0, term[:len(term)-1], nil) },
	}
	for _, kind := range inits {
		for name, bad := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				var in *Init
				if kind == "small" {
					in, _ = enterable(t, kind, 0)
				} else {
					in = startInit(t)
				}
				in.sendMu.Lock()
				err := bad(in.conn)
				in.sendMu.Unlock()
				// The init may be gone before the last chunk: EPIPE, or ECONNRESET where it left
				// chunks unread.
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
	var lie pidwire.Encoder // an answer naming another pid than the pidfd's
	lie.U64(1)
	lie.U64(uint64(os.Getpid()))
	lie.U64(2)
	lie.U64(3)
	var exit pidwire.Encoder
	exit.U64(1)
	exit.U32(0)
	exit.U32(0)
	cases := map[string]func(c *pidwire.Conn) error{
		"a message over the bound":  func(c *pidwire.Conn) error { return c.Send(pidwire.MsgExit, 0, make([]byte, pidwire.MaxReply+1), nil) },
		"unknown type":              func(c *pidwire.Conn) error { return c.Send(77, 0, nil, nil) },
		"flags":                     func(c *pidwire.Conn) error { return c.Send(pidwire.MsgExit, pidwire.FlagMore, exit.Bytes(), nil) },
		"an answer without a pidfd": func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawned, 0, lie.Bytes(), nil) },
		"an exit with a descriptor": func(c *pidwire.Conn) error { return c.Send(pidwire.MsgExit, 0, exit.Bytes(), []int{pidfd}) },
		"a lie about the pid":       func(c *pidwire.Conn) error { return c.Send(pidwire.MsgSpawned, 0, lie.Bytes(), []int{pidfd}) },
		"a second hello":            func(c *pidwire.Conn) error { return c.Send(pidwire.MsgHello, 0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, nil) },
		"a signal answer with a descriptor": func(c *pidwire.Conn) error {
			return c.Send(pidwire.MsgSignaled, 0, make([]byte, 12), []int{pidfd})
		},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			server, err := pidwire.NewConn(pair[0], "server")
			if err != nil {
				t.Fatal(err)
			}
			peer, err := pidwire.NewConn(pair[1], "fake init")
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
				if !errors.Is(rep.err, pidwire.ErrProtocol) || !errors.Is(rep.err, ErrEnded) {
					t.Errorf("the waiting spawn got %+v, want a protocol error", rep)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiting spawn got nothing")
			}
			if err := in.Err(); !errors.Is(err, pidwire.ErrProtocol) {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}
