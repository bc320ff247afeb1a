// Package safefs reads and writes reaper's own files through directory descriptors, so that nothing
// another user or a task can write steers it.
//
// A [Dir] is a directory opened by descriptor after checking that it belongs to this process's
// effective user and that nobody else can write it ([OpenRoot] also checks every directory above it:
// owned by root or this user, and not writable by others unless sticky). Every name below a Dir is
// one path component, opened relative to the Dir's descriptor with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, falling back to
// openat with O_NOFOLLOW where openat2 is refused (ENOSYS on kernels before 5.6, EPERM under some
// seccomp profiles). So no symbolic link is followed, no FIFO or device is opened for reading (a file
// is first opened with O_PATH and checked with fstat: a regular file, owned by this user, not
// writable by group or others, one link, no larger than the caller's cap), and no read is unbounded.
// Writes create a new file (O_CREAT|O_EXCL) under a temporary name and rename it into place, so no
// write goes through a name someone else could have replaced.
//
// Errors are *fs.PathError values carrying the operation and the path; the checks' causes are
// [ErrSymlink], [ErrNotRegular], [ErrNotDir], [ErrOwner], [ErrWritable], [ErrLinked] and
// [ErrTooLarge].
//
// The package is Linux-only; elsewhere it is empty.
package safefs
