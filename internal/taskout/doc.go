// Package taskout keeps a task's output: the whole stream in a file within a store's disk budget,
// its most recent bytes in memory once it outgrows it, read by offset, by tail or by grep, and fed
// from the task's pipe or terminal by a pump.
//
// A [Store] is a directory of output files that share one budget (a session's, in reaper); an
// [Output] is one task's stream, kept in a file of the store named for it; a [Pump] copies a pipe or
// a terminal's master into an Output until its end. Nothing here knows processes or sessions: the
// caller says when a stream ends ([Output.End]) and when the store closes ([Store.Close]).
//
// Reads ([Output.Read], [Output.All], [Output.Grep], [Output.Tail]) are bounded, and hold no lock
// over work that grows with the output: each reads through a view taken under the output's lock
// (view_linux.go). Line reads are bounded as scan_linux.go says.
//
// Lock order. Each mutex guards the fields that follow it. Where two are held at once they are taken
// in this order, never the other way:
//
//	Pump.mu     held across each read of the pipe (and the Output.Write it makes)
//	Output.mu   held across each write of the file, never across a read of it
//	Store.mu    a leaf
//
// The package is Linux-only; elsewhere it is empty.
package taskout
