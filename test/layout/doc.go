// Package layout tests the repository's shape: which package may import which.
package layout
