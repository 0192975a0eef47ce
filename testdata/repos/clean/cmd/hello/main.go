// Command hello prints a greeting.
package main

import (
	"fmt"

	hello "stockade.test/repo/clean"
)

func main() { fmt.Println(hello.Message("world")) }
