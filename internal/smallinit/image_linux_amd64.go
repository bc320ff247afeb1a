package smallinit

import _ "embed"

// image is the program, built from c/init.c (see TestBuild).
//
//go:embed init_linux_amd64.elf
var image []byte
