package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveIfNew: a directory made during the test and left empty goes at its end; one that was
// there before, or that holds something, stays.
func TestRemoveIfNew(t *testing.T) {
	base := t.TempDir()
	made, before, full := filepath.Join(base, "made"), filepath.Join(base, "before"), filepath.Join(base, "full")
	if err := os.Mkdir(before, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Run("inner", func(t *testing.T) {
		for _, d := range []string{made, before, full} {
			RemoveIfNew(t, d)
		}
		for _, d := range []string{made, full} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(full, "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Lstat(made); !os.IsNotExist(err) {
		t.Errorf("%s made empty during the test is still there (%v)", made, err)
	}
	for _, d := range []string{before, full} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
