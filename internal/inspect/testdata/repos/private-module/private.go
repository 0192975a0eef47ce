// Package private depends on a module only an authenticating proxy
// serves; its test checks that the credentials acquisition used did not
// reach where it runs.
package private

import "stockade.test/greet"

// Hello greets the team.
func Hello() string { return greet.Hello("team") }
