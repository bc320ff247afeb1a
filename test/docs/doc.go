// Package docs tests that README.md and the pages of docs/ work as written: it runs the Quick start's
// server and connects to it, runs the reaper commands of console examples, checks every sh block with
// bash, every reaper flag and REAPER_* variable against the binary's --help, every JSON example and
// every relative link, the tools and arguments of docs/tools.md against those the binary serves in
// each protocol era (both ways, and their text free of control bytes), and names, for each other
// command a user is told to run, the test that runs it or why none can.
//
// The tests are Linux-only; elsewhere the package has none.
package docs
