package cgroup

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidName is returned for a slice name that could escape its parent or clash with cgroupfs files.
var ErrInvalidName = errors.New("invalid slice name")

// maxNameLen keeps names well below NAME_MAX (255) so that suffixes added by callers still fit.
const maxNameLen = 128

// ValidateName reports whether name can be used as one path component of a slice: non-empty, at most
// 128 bytes of letters, digits, '-', '_' and '.', not starting with '.' and not of the form "cgroup.*"
// (the kernel's interface files). It never touches the filesystem.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > maxNameLen:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrInvalidName, len(name), maxNameLen)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("%w %q: starts with '.'", ErrInvalidName, name)
	case strings.HasPrefix(name, "cgroup."):
		return fmt.Errorf("%w %q: reserved prefix \"cgroup.\"", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return fmt.Errorf("%w %q: byte %q not allowed (use letters, digits, '-', '_', '.')", ErrInvalidName, name, c)
		}
	}
	return nil
}
