// Package hello is the maintain-untidy fixture: go.mod requires brk
// directly but nothing imports it, so go mod tidy after the greet upgrade
// drops a direct dependency: normalization_refused.
package hello

import "stockade.test/greet"

// Message greets name.
func Message(name string) string { return greet.Hello(name) }
