// Package slow is a fixture dependency: v1.0.1, a patch release whose
// Wait never returns, so a caller's test outlives any validation timeout.
package slow

import "time"

// Wait returns when the work is done: never.
func Wait() {
	for {
		time.Sleep(time.Hour)
	}
}
