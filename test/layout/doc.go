// Package layout tests the repository's shape: which package may import which, that the public
// packages name no internal type, that no package outgrows a quarter of the program, and that the
// security inventory lists every call that touches a path.
package layout
