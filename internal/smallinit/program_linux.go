package smallinit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is wrapped by Load's error where there is no small init for this architecture.
var ErrUnsupported = errors.New("no small init for this architecture")

// A Program is the small init, in a sealed memory file of this process: it is run through the file's
// descriptor ([Program.Path]), with no file on disk to find, replace or lack. Its methods are safe for
// concurrent use.
type Program struct {
	f    *os.File // read-only, close-on-exec; fixed at creation, closed by Close
	path string

	// mu guards the field that follows.
	mu  sync.Mutex
	err error // the first failure to run it, from Fail
}

// minFD is the lowest descriptor the program's file may have: above those a child's first
// descriptors are moved to before it executes the program (an init's are 0 to 3).
const minFD = 16

// Load writes the program into a memory file and seals it against every change. It fails with an
// error wrapping ErrUnsupported where there is no program for this architecture, and where memory
// files cannot be made or executed here (vm.memfd_noexec set to 2).
func Load() (*Program, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("%w (%s)", ErrUnsupported, runtime.GOARCH)
	}
	return LoadImage(image)
}

// LoadImage is Load of another program in place of the small init: for a test of what happens where
// the program cannot run.
func LoadImage(image []byte) (*Program, error) {
	// MFD_EXEC says the file is to be executed, where vm.memfd_noexec would otherwise deny it;
	// kernels before 6.3 do not know the flag (EINVAL), and execute every memory file.
	fd, err := unix.MemfdCreate("reaper-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("reaper-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("load the small init: memfd_create: %w", err)
	}
	defer unix.Close(fd)
	for b := image; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			return nil, fmt.Errorf("load the small init: write: %w", err)
		}
		b = b[n:]
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("load the small init: seal: %w", err)
	}
	// Kernels that deny write access to what they execute refuse a file open for writing (ETXTBSY;
	// 6.18 here does not): the program is kept open read-only only, at a descriptor no child's first
	// ones can take before it executes the program.
	ro, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("load the small init: reopen: %w", err)
	}
	high, err := unix.FcntlInt(uintptr(ro), unix.F_DUPFD_CLOEXEC, minFD)
	unix.Close(ro)
	if err != nil {
		return nil, fmt.Errorf("load the small init: dup: %w", err)
	}
	return &Program{f: os.NewFile(uintptr(high), "reaper-init"), path: "/proc/self/fd/" + strconv.Itoa(high)}, nil
}

// Path is the path a child of this process executes the program by, until Close: its descriptor as
// /proc/self shows it (close-on-exec, it is still open while execve opens it).
func (p *Program) Path() string { return p.path }

// Fail records that the program could not be run here, and why (the first failure only); Err then
// returns it, and callers run another init.
func (p *Program) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// Err returns the failure Fail recorded, or nil.
func (p *Program) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close closes the program's file; no child may execute it from then on. It is idempotent.
func (p *Program) Close() error {
	if err := p.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
