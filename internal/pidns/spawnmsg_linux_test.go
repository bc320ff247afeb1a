package pidns

import (
	"errors"
	"os"
	"reflect"
	"syscall"
	"testing"
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
	want := spawnMsg{ID: 42, Argv: r.Argv, Attr: syscall.ProcAttr{Env: r.Env, Dir: r.Dir, Files: []uintptr{uintptr(fds[0]), uintptr(fds[1])},
		Sys: &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: fds[0], Credential: r.Credential}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if _, err := decodeSpawn(payload, fds[:1]); !errors.Is(err, ErrProtocol) {
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
		if err == nil && (len(r.Argv) == 0 || len(r.Attr.Files) > maxFiles) {
			t.Errorf("accepted %+v", r)
		}
	})
}
