package testjson

import "regexp"

// NewerGo is a module that needs a newer Go than the running toolchain.
// Under GOTOOLCHAIN=local the go command refuses it rather than download
// another toolchain; reports call this requires_newer_toolchain.
type NewerGo struct {
	// Module and Version name the module version; both "" when the main
	// module's own go.mod asks for the newer Go.
	Module, Version string
	// Go is the version required, such as "1.99".
	Go string
	// Running is the toolchain's version, such as "1.26.8".
	Running string
}

// newerGoRE matches the refusal in its forms: "go: M@V requires go >= X
// (running go Y; ...)" (go get, go build), with a "M@query: " prefix (go
// get M@latest), and "go: M@V: module M@V requires ..." (go mod download,
// go list -m).
var newerGoRE = regexp.MustCompile(`(?m)^go: (?:\S+@\S+: )?(?:module )?(?:(\S+)@(\S+)|go\.mod) requires go >= (\S+) \(running go (\S+?)[;)]`)

// NeedsNewerGo returns every "requires go >= X" refusal in the go
// command's stderr (from go get, go mod download, go build, ...), in order
// and without duplicates.
func NeedsNewerGo(stderr []byte) []NewerGo {
	var out []NewerGo
	seen := make(map[NewerGo]bool)
	for _, m := range newerGoRE.FindAllSubmatch(stderr, -1) {
		n := NewerGo{Module: string(m[1]), Version: string(m[2]), Go: string(m[3]), Running: string(m[4])}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
