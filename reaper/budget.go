package reaper

// Budget caps the output one call returns: in characters, what a model reads, and in what they cost
// the caller to carry, which a character's length alone does not say (a control character that JSON
// escapes takes six bytes). A foreground command's whole output is cut from its middle (about half of
// each cap to its start, the rest to its end), an incremental read at its end, and the cut is counted
// like any other drop. Whatever its Budget, a read holds at most 16 MiB (a foreground command's whole
// output: 16 MiB of each end). The zero Budget caps nothing else.
//
// Characters are the Unicode code points of the output read as UTF-8; a byte that is not part of
// valid UTF-8 counts as one (a run of them becomes one U+FFFD in the text returned).
type Budget struct {
	// Chars is the most characters the output returned may hold; zero means no cap.
	Chars int
	// Cost prices one character; it must be at least the character's length in UTF-8 (and at most
	// 255 for an ASCII character, whose prices are read once per call). A byte that is not part of
	// valid UTF-8 is priced as U+FFFD, which is what it becomes.
	Cost func(r rune) int
	// Max is the most the output returned may cost; zero (or a nil Cost) means no cap.
	Max int
}
