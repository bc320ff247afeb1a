package main

// exitFunc ends the process with a command's status once the command's work is done, skipping the
// tidying only an in-process caller needs (signal.Stop, the joins of the signal and guard watchers),
// which a stdio client would wait for twice at every close. main passes os.Exit; a test passes nil,
// and the command returns.
type exitFunc func(code int)

// now exits with code if e is set; otherwise it returns code.
func (e exitFunc) now(code int) int {
	if e != nil {
		e(code)
	}
	return code
}
