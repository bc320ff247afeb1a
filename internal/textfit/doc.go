// Package textfit fits a task's output, as bytes, into text within a budget of characters and cost.
//
// A Budget caps what one read returns, in characters (Unicode code points, what a model reads) and
// in what the caller pays to carry them (Cost); its methods cut bytes between characters, from the
// start, the end, or the middle of an output. The rest are the pieces such a cut needs: a Ring that
// keeps an output's last bytes, a count of characters fast enough for all a task writes, the length
// of a character cut off at the end, and the conversion of what is kept to valid UTF-8 with a line
// for what was left out.
package textfit
