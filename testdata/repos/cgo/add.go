// Package add adds in C.
package add

// int add(int a, int b) { return a + b; }
import "C"

// Add returns a+b, computed by the C function add.
func Add(a, b int) int { return int(C.add(C.int(a), C.int(b))) }
