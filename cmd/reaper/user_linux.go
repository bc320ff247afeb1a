package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/cgreaper/reaper/reaper"
)

// lookupUser resolves --user USER[:GROUP]: a name or a numeric id, and optionally a group by name or
// id, which becomes the primary group instead of the user's. The supplementary groups are the user's
// (from the group database). A numeric user without an account runs with HOME=/ and no supplementary
// groups. os/user reads /etc/passwd and /etc/group itself in a static build, so accounts from NSS
// modules (LDAP, sssd) are not found by name there: give their ids.
func lookupUser(spec string) (*reaper.User, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || hasGroup && group == "" {
		return nil, fmt.Errorf("--user %q: want USER or USER:GROUP", spec)
	}
	u, err := user.Lookup(name)
	if err != nil {
		if id, perr := strconv.ParseUint(name, 10, 32); perr == nil {
			if u, err = user.LookupId(name); err != nil {
				// An id without an account.
				u = &user.User{Uid: name, Gid: name, Username: strconv.FormatUint(id, 10), HomeDir: "/"}
			}
		}
	}
	if err != nil && u == nil {
		return nil, fmt.Errorf("--user %q: %w", spec, err)
	}
	out := &reaper.User{Name: u.Username, Home: u.HomeDir}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("--user %q: uid %q or gid %q is not a number", spec, u.Uid, u.Gid)
	}
	out.Uid, out.Gid = uint32(uid), uint32(gid)
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				out.Groups = append(out.Groups, uint32(n))
			}
		}
	}
	if hasGroup {
		g, err := user.LookupGroup(group)
		if err != nil {
			if _, perr := strconv.ParseUint(group, 10, 32); perr != nil {
				return nil, fmt.Errorf("--user %q: %w", spec, err)
			}
			g = &user.Group{Gid: group}
		}
		n, _ := strconv.ParseUint(g.Gid, 10, 32)
		out.Gid = uint32(n)
	}
	if out.Home == "" {
		out.Home = "/"
	}
	return out, nil
}

// tokenWarnings says what exposes the bearer tokens to other local processes, tasks included: a
// token on the command line (in /proc/<pid>/cmdline of the guard and the server), and a token file
// that others may read.
func tokenWarnings(c serveConfig) []string {
	var warn []string
	if c.tokenOnCommandLine {
		warn = append(warn, "--token on the command line can be read by every local process, tasks included, in /proc/<pid>/cmdline of reaper and of its guard: set REAPER_TOKEN in reaper's environment or use --token-file with a file only reaper can read")
	}
	for _, file := range []string{c.tokenFile, c.adminTokenFile} {
		if file == "" {
			continue
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
			warn = append(warn, fmt.Sprintf("the token file %s can be read by other users (mode %04o): make it readable by reaper only (chmod 600)", file, fi.Mode().Perm()))
		}
	}
	return warn
}

// tasksRunAs says, for the first log line, whose user tasks run as.
func tasksRunAs(c serveConfig) string {
	if c.user == "" {
		return fmt.Sprintf("reaper's own user (uid %d; --user runs them as another)", os.Geteuid())
	}
	return c.user
}
