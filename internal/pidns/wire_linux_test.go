package pidns

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

func TestSpawnRoundTrip(t *testing.T) {
	r := Request{
		Argv: []string{"/bin/sh", "-c", "x"}, Env: []string{"A=1", ""}, Dir: "/tmp",
		FDs: fdsOf(os.Stdin, os.Stdout), Setpgid: true, Foreground: true, Ctty: 0,
		Credential: &syscall.Credential{Uid: 7, Gid: 8, Groups: []uint32{9, 10}},
	}
	payload, fds, err := encodeSpawn(42, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSpawn(payload, fds)
	if err != nil {
		t.Fatal(err)
	}
	want := spawnRequest{id: 42, argv: r.Argv, env: r.Env, dir: r.Dir, files: fds, cgroup: -1, setpgid: true, fg: true, cred: r.Credential}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if _, err := decodeSpawn(payload, fds[:1]); !errors.Is(err, errProtocol) {
		t.Errorf("a request with a descriptor missing: %v", err)
	}
	for n := 0; n < len(payload); n++ {
		if _, err := decodeSpawn(payload[:n], fds); err == nil {
			t.Errorf("a request cut to %d bytes decoded", n)
		}
	}
}

func FuzzDecodeSpawn(f *testing.F) {
	payload, _, _ := encodeSpawn(1, Request{Argv: []string{"a"}, FDs: fdsOf(os.Stdin), Credential: &syscall.Credential{Groups: []uint32{1}}})
	f.Add(payload, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, nfds uint8) {
		fds := make([]int, nfds%8)
		r, err := decodeSpawn(b, fds)
		if err == nil && (len(r.argv) == 0 || len(r.files) > maxFiles) {
			t.Errorf("accepted %+v", r)
		}
	})
}

// TestInitRefusesGarbage: a request that breaks the protocol ends the init (and so its namespace):
// it takes orders from the server only, and a server that sends garbage is not one.
func TestInitRefusesGarbage(t *testing.T) {
	good, _, _ := encodeSpawn(1, Request{Argv: []string{"/bin/true"}, FDs: fdsOf(os.Stdin)})
	cases := map[string]func(c *conn) error{
		"unknown type":         func(c *conn) error { return c.send(9, 0, nil, nil) },
		"descriptors missing":  func(c *conn) error { return c.send(msgSpawn, 0, good, nil) },
		"too many descriptors": func(c *conn) error { return c.send(msgSpawn, 0, good, []int{0, 0}) },
		"a cut request":        func(c *conn) error { return c.send(msgSpawn, 0, good[:len(good)-1], []int{0}) },
		"descriptors late": func(c *conn) error {
			return errors.Join(c.send(msgSpawn, flagMore, nil, nil), c.send(msgSpawn, 0, good, []int{0}))
		},
		"a request too large":     func(c *conn) error { return c.sendChunked(msgSpawn, make([]byte, maxRequest+1), nil) },
		"a datagram over a chunk": func(c *conn) error { return c.send(msgSpawn, 0, make([]byte, maxChunk+1), nil) },
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			in := startInit(t)
			in.sendMu.Lock()
			err := bad(in.conn)
			in.sendMu.Unlock()
			if err != nil && !errors.Is(err, unix.EPIPE) {
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
	lie.u64(1)
	lie.u64(uint64(os.Getpid()))
	lie.u64(2)
	lie.u64(3)
	var exit encoder
	exit.u64(1)
	exit.u32(0)
	cases := map[string]func(c *conn) error{
		"a message over the bound":  func(c *conn) error { return c.send(msgExit, 0, make([]byte, maxReply+1), nil) },
		"unknown type":              func(c *conn) error { return c.send(77, 0, nil, nil) },
		"flags":                     func(c *conn) error { return c.send(msgExit, flagMore, exit.b, nil) },
		"an answer without a pidfd": func(c *conn) error { return c.send(msgSpawned, 0, lie.b, nil) },
		"an exit with a descriptor": func(c *conn) error { return c.send(msgExit, 0, exit.b, []int{pidfd}) },
		"a lie about the pid":       func(c *conn) error { return c.send(msgSpawned, 0, lie.b, []int{pidfd}) },
		"a second hello":            func(c *conn) error { return c.send(msgHello, 0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, nil) },
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			server, err := newConn(pair[0], "server")
			if err != nil {
				t.Fatal(err)
			}
			peer, err := newConn(pair[1], "fake init")
			if err != nil {
				t.Fatal(err)
			}
			defer peer.close()
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
				if !errors.Is(rep.err, errProtocol) || !errors.Is(rep.err, ErrEnded) {
					t.Errorf("the waiting spawn got %+v, want a protocol error", rep)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiting spawn got nothing")
			}
			if err := in.Err(); !errors.Is(err, errProtocol) {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}
