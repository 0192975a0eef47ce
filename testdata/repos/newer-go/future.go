// Package future is the newer-go fixture: its go directive is 1.99.
package future

// Hi returns hi.
func Hi() string { return "hi" }
