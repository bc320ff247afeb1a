// Package textfit fits a task's output, as bytes, into text within a budget of characters and cost
// (see Budget), and holds the pieces such a cut needs.
package textfit
