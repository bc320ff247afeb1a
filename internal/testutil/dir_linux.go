package testutil

import (
	"os"
	"testing"
)

// RemoveIfNew removes dir when the test ends if it did not exist when RemoveIfNew was called and is
// an empty directory then: for a shared place that a program under test creates and leaves behind,
// empty, as it should (reaper's default state directory, /run/reaper for root). A directory that
// existed before, or holds something at the end, is left alone.
func RemoveIfNew(t testing.TB, dir string) {
	t.Helper()
	if _, err := os.Lstat(dir); err == nil {
		return
	}
	t.Cleanup(func() {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			os.Remove(dir) // an rmdir: it fails, leaving the directory, unless it is empty
		}
	})
}
