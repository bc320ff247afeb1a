package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/safefs"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
	"golang.org/x/sys/unix"
)

// defaultHTTPAddr is where --http listens when it is given without an address.
const defaultHTTPAddr = "127.0.0.1:8765"

// serveConfig is what the serve command's flags and environment set.
type serveConfig struct {
	contained
	http        string
	token       string
	tokenFile   string
	idleTimeout time.Duration
	keepalive   time.Duration
	bgTimeout   time.Duration
	maxTasks    int
	maxOutput   int
	outBudget   byteSize
	outTotal    byteSize
	maxWS       int
	user        string

	tokenOnCommandLine bool // --token was given as an argument, not from the environment
	insecureNoAuth     bool

	maxSessions      int
	maxSessionsPerID int
	maxCallSize      byteSize
	maxConns         int
	maxConnsPerPeer  int
	maxConnsPerID    int

	admin          string
	adminToken     string
	adminTokenFile string
	logFormat      string
	logLevel       string
	memoryMax      byteSize
	pidsMax        int64
	cpuMax         cpus
}

const serveUsage = `Usage: reaper serve [flags]

Serves MCP over stdio (the default) or Streamable HTTP (--http). Each MCP session gets its own
cgroup slice; when the session ends (client close, DELETE, idle timeout, lost keepalive, SIGTERM),
every process it started dies. Over HTTP, clients of MCP 2026-07-28 (which has no sessions) open
workspaces instead, which end the same way when closed, unused for --idle-timeout, or at SIGTERM.

Per-session limits (--memory-max, --pids-max, --cpu-max) are written into each session's slice.
They need cgroup containment and the host's memory, pids or cpu controller: with --containment
cgroup a missing controller is an error naming it; with auto, a warning, and that limit is not
applied.

The admin endpoint (--admin) serves /healthz (alive), /readyz (ready once containment is set up;
the body names the mode and why) and /metrics (Prometheus), apart from MCP so that probes need no
MCP token. It listens on loopback only unless an admin token is set (--admin-token,
REAPER_ADMIN_TOKEN or --admin-token-file); with one it may listen anywhere (a pod's IP, for the
kubelet's probes): /healthz and /readyz's status code stay open to all, /readyz's explanation needs
the token off loopback, and /metrics requires the token as a bearer token, on loopback too. A
loopback listener answers only loopback Host names, and no cross-origin browser request.

Every flag can also be set from the environment as REAPER_<NAME> (for example
REAPER_IDLE_TIMEOUT=5m); a flag on the command line wins.

Flags:
`

// parseServe parses the serve command's arguments and environment.
func parseServe(args []string, getenv func(string) string) (serveConfig, error) {
	var c serveConfig
	fs := c.flagSet("serve", "session", getenv)
	fs.Var((*httpAddr)(&c.http), "http", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio (--http alone: "+defaultHTTPAddr+")")
	fs.StringVar(&c.token, "token", "", "bearer `token` required on every HTTP request (default: reaper's own, kept in the file \""+instance.TokenFile+"\" of the state directory, made on first use)")
	fs.StringVar(&c.tokenFile, "token-file", "", "read bearer tokens from `file`: one per line, as \"token\" or \"identity token\"; # starts a comment")
	fs.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "serve HTTP clients without a token, on a loopback address only: every local user and every task can then run commands as the tasks' user (each client is known by its peer: its uid on loopback)")
	c.maxCallSize = mcpserver.DefaultMaxCallBytes
	fs.Var(&c.maxCallSize, "max-call-size", "most bytes (`size`: with K, M as powers of 1024) of a tool call's message, over stdio or HTTP; every other message may have 64K, and every message at most 10000 values nested at most 32 deep")
	fs.IntVar(&c.maxSessions, "max-sessions", defaultMaxSessions(), "most sessions and workspaces held at once (default: one per 64 MiB of the machine's memory, between 8 and 1024)")
	fs.IntVar(&c.maxSessionsPerID, "max-sessions-per-identity", 0, "most sessions and workspaces one identity (a token) holds at once (0: all of --max-sessions where there is one identity, else a quarter of them)")
	fs.IntVar(&c.maxConns, "max-connections", defaultMaxConns(), "most HTTP connections open at once (default: a quarter of the open-file limit, at most 4096); a quarter of them may be waiting to authenticate")
	fs.IntVar(&c.maxConnsPerPeer, "max-connections-per-peer", 0, "most HTTP connections one peer (its address; on loopback, the uid that owns its socket) may have open before they authenticate (0: an eighth of those that may wait to authenticate, at least 32)")
	fs.IntVar(&c.maxConnsPerID, "max-connections-per-identity", 0, "most HTTP connections one identity (a token; with --insecure-no-auth, a peer) holds open once they authenticate (0: all of --max-connections where there is one identity, else a quarter of them)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", mcpserver.DefaultIdleTimeout, "end an HTTP session with no request, or a workspace with no call that names it (its lease), for this `duration`, killing its processes")
	fs.DurationVar(&c.keepalive, "keepalive", 0, fmt.Sprintf("ping clients this often and end a session whose client leaves %d pings in a row unanswered, each given this long (0: off)", mcpserver.KeepAliveMisses))
	fs.DurationVar(&c.grace, "grace", reaper.DefaultGrace, "time between SIGTERM and SIGKILL when a session or task ends (0: SIGKILL at once)")
	fs.DurationVar(&c.bgTimeout, "bg-timeout", 0, "kill background tasks that run longer than this (0: no limit)")
	fs.IntVar(&c.maxTasks, "max-tasks", reaper.DefaultMaxTasks, "most background tasks running at once per session")
	fs.IntVar(&c.maxOutput, "max-output", mcpserver.DefaultMaxOutput, fmt.Sprintf("most characters (Unicode code points) of a command's output a tool result holds, head and tail, unless the call asks for another number with max_output; at most %d", mcpserver.MaxOutput))
	c.outBudget = reaper.DefaultOutputBudget
	fs.Var(&c.outBudget, "output-budget", "disk space (`size`: bytes, or with K, M, G as powers of 1024) the files that keep a session's whole output may take together, in the state directory (usually a tmpfs: memory); at the limit the oldest finished commands' files go first, then a command's own output keeps its head and tail")
	fs.Var(&c.outTotal, "output-budget-total", "disk space (`size`) the output files of all sessions may take together, so that many sessions cannot fill the state directory (default: a quarter of its file system, at least --output-budget); at the limit each session first loses its oldest finished commands' files, then its commands' output keeps its head and tail")
	fs.IntVar(&c.maxWS, "max-workspaces", mcpserver.DefaultMaxWorkspaces, "most workspaces (MCP 2026-07-28 over HTTP) open at once per identity")
	fs.StringVar(&c.cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup under which sessions' slices are created, made with its missing parents; if it cannot be used reaper exits (default: a child \"reaper\" of reaper's own cgroup, with process containment as the fallback)")
	fs.StringVar(&c.user, "user", "", "run tasks as `USER[:GROUP]` (a name or an id), with the user's groups and HOME, no capabilities and no_new_privs, instead of reaper's own user; reaper must be root")
	fs.StringVar(&c.admin, "admin", "", "serve /healthz, /readyz and /metrics at http://`ADDR` (off by default). Loopback only, unless an admin token is set: then any address, with /healthz and /readyz's status open to all and /metrics (and, off loopback, /readyz's explanation) requiring the token")
	fs.StringVar(&c.adminToken, "admin-token", "", "bearer `token` that /metrics requires (not an MCP token: a scraper must not hold a credential that runs commands); needed for a non-loopback --admin")
	fs.StringVar(&c.adminTokenFile, "admin-token-file", "", "read the admin token from `file` (its first line)")
	fs.StringVar(&c.logFormat, "log-format", "text", logFormatUsage)
	fs.StringVar(&c.logLevel, "log-level", "info", logLevelUsage)
	fs.Var(&c.memoryMax, "memory-max", "limit the memory of each session's processes together to `size` (memory.max, with memory.swap.max 0 so that swap cannot extend it: bytes, or with K, M, G, T as powers of 1024, such as 512M; 0: none); the OOM killer then acts within the session, and the command's result says so")
	fs.Int64Var(&c.pidsMax, "pids-max", 0, "limit each session to this many processes and threads (pids.max; 0: none); a command's result says when its forks were refused")
	fs.Var(&c.cpuMax, "cpu-max", "limit each session to this many `CPUs` of time (cpu.max with a 100 ms period: 1.5 is one and a half; 0: none); a command's result says when it was held back")

	if err := parseFlags(fs, args, false, getenv); err != nil {
		return c, err
	}
	_, c.tokenOnCommandLine = argValue(args, "token")
	if c.http == "true" { // REAPER_HTTP=true
		c.http = defaultHTTPAddr
	}
	switch {
	case c.idleTimeout <= 0:
		return c, errors.New("--idle-timeout must be positive")
	case c.keepalive < 0, c.grace < 0, c.bgTimeout < 0:
		return c, errors.New("--keepalive, --grace and --bg-timeout must not be negative")
	case c.maxTasks < 1:
		return c, errors.New("--max-tasks must be at least 1")
	case c.maxWS < 1:
		return c, errors.New("--max-workspaces must be at least 1")
	case c.maxOutput < 1 || c.maxOutput > mcpserver.MaxOutput:
		return c, fmt.Errorf("--max-output must be between 1 and %d characters", mcpserver.MaxOutput)
	case c.outBudget < minOutputBudget:
		return c, fmt.Errorf("--output-budget must be at least %s", byteText(minOutputBudget))
	case c.pidsMax < 0:
		return c, errors.New("--pids-max must not be negative")
	case c.adminToken != "" && c.adminTokenFile != "":
		return c, errors.New("give only one of --admin-token and --admin-token-file")
	case c.insecureNoAuth && (c.token != "" || c.tokenFile != ""):
		return c, errors.New("--insecure-no-auth serves clients without a token: give it, or a token (--token, REAPER_TOKEN, --token-file), not both")
	case c.maxSessions < 1 || c.maxSessionsPerID < 0:
		return c, errors.New("--max-sessions must be at least 1, and --max-sessions-per-identity not negative")
	case c.maxConns < 4 || c.maxConnsPerPeer < 0 || c.maxConnsPerID < 0:
		return c, errors.New("--max-connections must be at least 4, and --max-connections-per-peer and --max-connections-per-identity not negative")
	case c.outTotal != 0 && c.outTotal < c.outBudget:
		return c, errors.New("--output-budget-total must be at least --output-budget")
	case c.maxCallSize < 4<<10 || c.maxCallSize > 64<<20:
		return c, errors.New("--max-call-size must be between 4K and 64M")
	}
	if _, err := newLogger(io.Discard, c.logFormat, c.logLevel); err != nil {
		return c, err
	}
	return c, c.check()
}

// minOutputBudget is the smallest --output-budget: room for a head, a line and a tail.
const minOutputBudget = 64 << 10

// contained is what serve and run share of their configuration: how and where what they start is
// contained. Each command defines --grace and --cgroup-root itself.
type contained struct {
	runtimeDir  string // $XDG_RUNTIME_DIR (see reaper.Options.RuntimeDir)
	grace       time.Duration
	containment string
	pidNS       string
	privateTmp  bool
	cgroupRoot  string
	stateDir    string
}

// flagSet returns the flag set of the command name with the flags serve and run share; what names
// what gets a slice, a PID namespace and a /tmp (a session, the job).
func (c *contained) flagSet(name, what string, getenv func(string) string) *flag.FlagSet {
	c.runtimeDir = getenv("XDG_RUNTIME_DIR")
	fs := newFlagSet(name)
	fs.StringVar(&c.containment, "containment", "auto", "auto, cgroup (require cgroup v2) or process (process groups and /proc walk only)")
	fs.StringVar(&c.pidNS, "pid-namespace", "auto", "auto, on or off: run each "+what+"'s processes in a PID namespace of its own, whose init is reaper's, so that the kernel kills them all if reaper dies by any cause, and ps inside shows only them (auto: where reaper can make one, as root or through an unprivileged user namespace)")
	fs.BoolVar(&c.privateTmp, "private-tmp", false, "give each "+what+" an empty /tmp and /dev/shm of its own (a tmpfs in its PID namespace's mount namespace), which no other "+what+" sees and which go with it; needs PID namespaces")
	stateDirFlag(fs, &c.stateDir)
	return fs
}

// check refuses a --containment or --pid-namespace that is none of their words.
func (c *contained) check() error {
	if _, err := reaper.ParseContainment(c.containment); err != nil {
		return err
	}
	_, err := reaper.ParsePIDNamespace(c.pidNS)
	return err
}

// options returns the reaper.Options the flags set, for a Reaper that logs to log and is guarded
// through link, if it is: the guard is a companion of the Reaper's cgroup, and the Reaper announces
// its instance to it. The flags must have been checked.
func (c *contained) options(link guard.Link, log *slog.Logger) reaper.Options {
	containment, _ := reaper.ParseContainment(c.containment)
	pidNS, _ := reaper.ParsePIDNamespace(c.pidNS)
	opts := reaper.Options{
		Containment:  containment,
		PIDNamespace: pidNS,
		PrivateTmp:   c.privateTmp,
		Cgroup:       cgroup.Options{Root: c.cgroupRoot},
		RuntimeDir:   c.runtimeDir,
		StateDir:     c.stateDir,
		Grace:        &c.grace,
		Logger:       log,
	}
	if link.Pid != 0 {
		opts.Cgroup.Companions = []int{link.Pid}
	}
	if link.Announce != nil { // not a nil *os.File in the interface
		opts.Announce = link.Announce
	}
	return opts
}

// adminTokenValue returns the admin token from --admin-token or the first line of --admin-token-file.
func (c serveConfig) adminTokenValue() (string, error) {
	if c.adminTokenFile == "" {
		return c.adminToken, nil
	}
	b, err := safefs.ReadConfig(c.adminTokenFile, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if tok := strings.TrimSpace(line); tok != "" {
		return tok, nil
	}
	return "", fmt.Errorf("admin token file %s: empty first line", c.adminTokenFile)
}

// stateDirFlag defines --state-dir, which serve and sweep share.
func stateDirFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "state-dir", "", "`directory` for instances' state, which only reaper's user may write (it is refused otherwise); made with mode 0700 if missing (default: /run/reaper for root, $XDG_RUNTIME_DIR/reaper for others, else reaper-<uid> in the temporary directory or /dev/shm); instances that share a cgroup root should share it, so that one sweeps up after another that died")
}

// httpAddr is --http's value, which may stand alone (last, or before another flag): then it is
// defaultHTTPAddr.
type httpAddr string

func (a *httpAddr) String() string     { return string(*a) }
func (a *httpAddr) Set(s string) error { *a = httpAddr(s); return nil }
func (a *httpAddr) Bare() string       { return defaultHTTPAddr }

// maxTokenFile bounds a token file as read (see safefs.ReadConfig).
const maxTokenFile = 1 << 20

// tokens collects the bearer tokens from --token and --token-file, keyed to their identities.
func (c serveConfig) tokens() (map[string]string, error) {
	out := map[string]string{}
	if c.token != "" {
		out[c.token] = "token"
	}
	if c.tokenFile == "" {
		return out, nil
	}
	b, err := safefs.ReadConfig(c.tokenFile, maxTokenFile)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		switch len(fields) {
		case 0:
			continue
		case 1:
			out[fields[0]] = "token-" + strconv.Itoa(n)
		case 2:
			out[fields[1]] = fields[0]
		default:
			return nil, fmt.Errorf("token file %s line %d: want \"token\" or \"identity token\"", c.tokenFile, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", c.tokenFile, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("token file %s holds no token", c.tokenFile)
	}
	return out, nil
}

// isLoopback reports whether every address host:port can mean is a loopback address.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil // all interfaces
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// endpointURL is the MCP endpoint as the operator asked for it: the host of --http as given (a name
// stays a name; no host is 0.0.0.0), with the port the listener got (for port 0).
func endpointURL(asked string, got net.Addr) string {
	host, _, err := net.SplitHostPort(asked)
	if err != nil {
		host = asked
	}
	if host == "" {
		host = "0.0.0.0"
	}
	_, port, _ := net.SplitHostPort(got.String())
	return "http://" + net.JoinHostPort(host, port) + "/mcp"
}

// The defaults of the counts that are sized for the machine: what each costs is what there is of it.

// defaultMaxSessions is one session per 64 MiB of the machine's memory, between 8 and 1024: a session
// holds its init, its tasks' output files (on a tmpfs state directory, memory) and its tasks.
func defaultMaxSessions() int {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 64
	}
	n := int(uint64(si.Totalram) * uint64(si.Unit) / (64 << 20))
	return min(max(n, 8), 1024)
}

// defaultMaxConns is a quarter of the descriptors the process may open (Go raises the soft limit to
// the hard one at start), at most 4096: the rest stay for sessions' teardowns, tasks' pipes and
// terminals, cgroup files and /proc.
func defaultMaxConns() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1024
	}
	return int(min(max(rl.Cur/4, 16), 4096))
}

// byteSize is a flag value in bytes: a number with an optional unit K, M, G or T (powers of 1024;
// "Ki", "KiB" and "KB" mean the same, as in systemd's MemoryMax=). Zero means no limit.
type byteSize int64

func (b *byteSize) String() string {
	if b == nil || *b == 0 {
		return "0"
	}
	return byteText(int64(*b))
}

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseBytes parses "512M", "2G", "64Mi", "1073741824".
func parseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			shift = 10 * (i + 1)
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M, G or T)", s)
	}
	v *= float64(int64(1) << shift)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// cpus is the --cpu-max flag: CPUs as a decimal number (1.5 is one and a half CPUs' time per period).
type cpus float64

func (c *cpus) String() string {
	if c == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*c), 'g', -1, 64)
}

func (c *cpus) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v > 0 && v < 0.01 {
		return fmt.Errorf("%q is not a number of CPUs (0, or 0.01 and more; 1.5 means one and a half)", s)
	}
	*c = cpus(v)
	return nil
}

// byteText writes n bytes as --output-budget reads them.
func byteText(n int64) string {
	for i, unit := range []string{"G", "M", "K"} {
		if shift := 30 - 10*i; n != 0 && n%(1<<shift) == 0 {
			return strconv.FormatInt(n>>shift, 10) + unit
		}
	}
	return strconv.FormatInt(n, 10)
}
