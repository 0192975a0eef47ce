// Package old is the old-go fixture: its go directive is 1.16.
package old

// Hi returns hi.
func Hi() string { return "hi" }
