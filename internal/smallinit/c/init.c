/*
 * The small init of a session's PID namespace (see package smallinit, ../doc.go): pid 1 of new PID
 * and mount namespaces that reaper's server forks every process into itself. It holds the namespace
 * (when it dies, the kernel kills everything in it), mounts the namespace's /proc, lets the kernel
 * reap the orphans it adopts, sends signals to the namespace's processes when the server asks, and
 * exits at the end of its socket. It starts no process.
 *
 * It is built without a C library (build_linux_test.go has the command): every system call is made
 * here, no function of anyone else's is called, and nothing is allocated. The protocol is
 * internal/pidwire's; the constants below that name it are checked against that package by
 * TestConstants.
 */
#include <asm/unistd.h>
#include <linux/mount.h>
#include <linux/prctl.h>

/* internal/pidwire */
#define INIT_FD 3
#define MSG_HELLO 2
#define MSG_SIGNAL 6
#define MSG_SIGNALED 7
#define HELLO_PROC 1
#define MAX_SIGNALS 4

/* What the kernel headers of a C library would give. */
#define SOL_SOCKET 1
#define SO_TYPE 3
#define SOCK_SEQPACKET 5
#define MSG_CTRUNC 0x8
#define MSG_TRUNC 0x20
#define MSG_NOSIGNAL 0x4000
#define SIGKILL 9
#define SIGSTOP 19
#define NSIG 64
#define SIG_IGN 1
#define SIG_SETMASK 2
#define EINTR 4
#define ESRCH 3

#if defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The kernel enters with the stack pointer at argc, 16-byte aligned; the call leaves it as a C
 * function expects it. */
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call init_main\n"
	"	hlt\n");
#else
#error "no small init for this architecture: reaper runs its own program as the init there"
#endif

#define sys0(n) sys6(n, 0, 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

struct iovec {
	void *base;
	unsigned long len;
};

struct msghdr {
	void *name;
	int namelen;
	struct iovec *iov;
	unsigned long iovlen;
	void *control;
	unsigned long controllen;
	int flags;
};

/* The kernel's struct sigaction for rt_sigaction (not a C library's). */
struct ksigaction {
	unsigned long handler;
	unsigned long flags;
	unsigned long restorer;
	unsigned long mask;
};

static unsigned long len(const char *s)
{
	unsigned long n = 0;
	while (s[n])
		n++;
	return n;
}

__attribute__((noreturn)) static void quit(int status)
{
	for (;;)
		sys2(__NR_exit_group, status, 0);
}

/* stop writes "reaper: <what>" to standard error, the server's, and exits with status. */
__attribute__((noreturn)) static void stop(const char *what, int status)
{
	static const char prefix[] = "reaper: ";
	sys3(__NR_write, 2, prefix, sizeof prefix - 1);
	sys3(__NR_write, 2, what, len(what));
	sys3(__NR_write, 2, "\n", 1);
	quit(status);
}

/* What Go's package syscall calls the errors mount(2) documents, and ENOSYS (a seccomp profile's
 * answer): the hello's note reads as the Go init's would. TestErrnoText checks them. */
static const char *const errno_text[] = {
	[1] = "operation not permitted",
	[2] = "no such file or directory",
	[6] = "no such device or address",
	[12] = "cannot allocate memory",
	[13] = "permission denied",
	[14] = "bad address",
	[15] = "block device required",
	[16] = "device or resource busy",
	[19] = "no such device",
	[20] = "not a directory",
	[22] = "invalid argument",
	[24] = "too many open files",
	[30] = "read-only file system",
	[36] = "file name too long",
	[38] = "function not implemented",
	[40] = "too many levels of symbolic links",
};

static unsigned char *put32(unsigned char *p, unsigned v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
	return p + 4;
}

static unsigned get32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (unsigned)p[3] << 24;
}

static unsigned char *append(unsigned char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

/* hello sends the first message: flags, and a note that says what failed ("" when nothing did). */
static void hello(unsigned flags, const char *what, long err)
{
	unsigned char msg[128];
	unsigned char *p = msg + 2 + 8, *note = p;
	msg[0] = MSG_HELLO;
	msg[1] = 0;
	put32(msg + 2, flags);
	if (what) {
		p = append(p, what);
		p = append(p, ": ");
		if (-err > 0 && -err < (long)(sizeof errno_text / sizeof errno_text[0]) && errno_text[-err]) {
			p = append(p, errno_text[-err]);
		} else {
			/* "errno N", as Go says of one it has no name for */
			char digits[20];
			int n = 0;
			unsigned long v = -err;
			do
				digits[n++] = '0' + v % 10;
			while ((v /= 10) && n < 20);
			p = append(p, "errno ");
			while (n)
				*p++ = digits[--n];
		}
	}
	put32(msg + 6, p - note);
	if (sys6(__NR_sendto, INIT_FD, (long)msg, p - msg, MSG_NOSIGNAL, 0, 0) < 0)
		quit(0); /* the server is gone already */
}

/* signal_all sends each signal of a request in turn to every process of the namespace but this one
 * (kill(2) with pid -1, from pid 1), then answers: 0, or the first failure other than ESRCH (no
 * process left to signal is no failure). */
static void signal_all(const unsigned char *msg, long n)
{
	unsigned count, err = 0;
	unsigned char answer[2 + 8 + 4];
	if (n < 2 + 8 + 4)
		stop("the init of a PID namespace stops: pidns protocol error: a truncated signal request", 1);
	count = get32(msg + 10);
	if (count < 1 || count > MAX_SIGNALS || n != 2 + 8 + 4 + 4 * (long)count)
		stop("the init of a PID namespace stops: pidns protocol error: a signal request of the wrong size", 1);
	for (unsigned i = 0; i < count; i++) {
		unsigned sig = get32(msg + 14 + 4 * i);
		long r;
		if (sig < 1 || sig > NSIG)
			stop("the init of a PID namespace stops: pidns protocol error: a signal out of range", 1);
		r = sys2(__NR_kill, -1, sig);
		if (r < 0 && r != -ESRCH && err == 0)
			err = -r;
	}
	answer[0] = MSG_SIGNALED;
	answer[1] = 0;
	for (int i = 0; i < 8; i++)
		answer[2 + i] = msg[2 + i];
	put32(answer + 10, err);
	sys6(__NR_sendto, INIT_FD, (long)answer, sizeof answer, MSG_NOSIGNAL, 0, 0);
}

__attribute__((noreturn, used)) void init_main(long *sp)
{
	int type = 0;
	unsigned size = sizeof type;
	unsigned long none = 0;
	struct ksigaction ignore = {SIG_IGN, 0, 0, 0};
	unsigned char msg[64];
	const char *argv0 = sp[0] > 0 ? (const char *)sp[1] : "";
	long err;

	/* Pid 1 of a namespace, with the server's socket: the mounts below are made in a mount
	 * namespace of the init's own, never the host's. */
	if (sys0(__NR_getpid) != 1 || sys5(__NR_getsockopt, INIT_FD, SOL_SOCKET, SO_TYPE, &type, &size) != 0 ||
	    type != SOCK_SEQPACKET)
		stop("--pidns-init is the init of a session's PID namespace; reaper starts it itself", 2);
	/* Only the descriptors it was given: nothing the server left open by mistake stays open for
	 * as long as the namespace lives (close_range is Linux 5.9: before, they stay). */
	sys3(__NR_close_range, INIT_FD + 1, ~0U, 0);
	/* Not dumpable: a task running as the init's user cannot ptrace it or read its memory. */
	sys2(__NR_prctl, PR_SET_DUMPABLE, 0);
	/* ps shows argv[0] ("reaper-init") for the name too, rather than the descriptor's number that
	 * the server executes this program through. */
	{
		char name[16] = {0};
		const char *base = argv0;
		for (const char *p = argv0; *p; p++)
			if (*p == '/')
				base = p + 1;
		for (int i = 0; i < 15 && base[i]; i++)
			name[i] = base[i];
		if (name[0])
			sys2(__NR_prctl, PR_SET_NAME, name);
	}
	/* Every signal ignored: none sent from inside the namespace or from outside (the server's
	 * process group) ends or stops the init but SIGKILL and SIGSTOP from outside. An ignored signal
	 * is dropped when it is sent, never queued. SIGCHLD ignored: the kernel reaps the orphans the
	 * init adopts as they exit, as it does itself when the init ends. Then nothing blocked, so that
	 * nothing is queued either. Nothing the init ignores reaches a task: the server forks them. */
	for (int sig = 1; sig <= NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sys4(__NR_rt_sigaction, sig, &ignore, 0, sizeof ignore.mask);
	sys4(__NR_rt_sigprocmask, SIG_SETMASK, &none, 0, sizeof none);

	/* MS_SLAVE rather than MS_PRIVATE: tasks still see what the host mounts later. */
	if ((err = sys5(__NR_mount, "", "/", 0, MS_REC | MS_SLAVE, 0)) != 0)
		hello(0, "making the mounts slaves", err);
	else if ((err = sys5(__NR_mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0)) != 0)
		hello(0, "mounting /proc", err);
	else
		hello(HELLO_PROC, 0, 0);

	for (;;) {
		/* No room for descriptors: the kernel closes any sent along, and says so (MSG_CTRUNC);
		 * none comes with a valid request, nor is one longer than msg (MSG_TRUNC). */
		struct iovec iov = {msg, sizeof msg};
		struct msghdr h = {0, 0, &iov, 1, 0, 0, 0};
		long n = sys3(__NR_recvmsg, INIT_FD, &h, 0);
		if (n == 0 && h.flags == 0)
			quit(0); /* the server is gone, or ended this init: the kernel kills what is left */
		if (n == -EINTR)
			continue;
		if (n < 0)
			stop("the init of a PID namespace stops: reading its socket failed", 1);
		if (h.flags & (MSG_CTRUNC | MSG_TRUNC))
			stop("the init of a PID namespace stops: pidns protocol error: descriptors with a request, or one too long", 1);
		if (n < 2 || msg[0] != MSG_SIGNAL || msg[1] != 0)
			stop("the init of a PID namespace stops: pidns protocol error: a request other than a signal", 1);
		signal_all(msg, n);
	}
}
