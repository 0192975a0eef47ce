// Package agentbin ships the resident exec agent (cmd/stockade-agent) as
// bytes inside the library, so a program using sandbox/docker places the
// agent in sandboxes without a Go toolchain where it runs. The binary is
// committed: TestBinaryIsBuilt rebuilds it from this tree with the host's
// go command and the flags in its file (static, CGO_ENABLED=0, -trimpath,
// no VCS stamp, no build ID, stripped) and fails unless the bytes are the
// same; `go generate ./internal/agent/agentbin` (which runs that test with
// -update) refreshes it after a change to internal/agent or a new Go.
//
// Only linux/amd64 is shipped: on an engine of another architecture the
// backend runs every command through the engine, as without an agent.
package agentbin

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

//go:generate go test -run TestBinaryIsBuilt -update .

// File is the name of the committed binary in this directory.
const File = "stockade-agent-linux-amd64"

//go:embed stockade-agent-linux-amd64
var amd64 []byte

// For returns the agent for an engine of architecture arch (the engine's
// Info.Architecture: "x86_64" or "amd64"), or nil when none is shipped.
func For(arch string) []byte {
	switch arch {
	case "x86_64", "amd64":
		return amd64
	}
	return nil
}

// Digest returns the hex sha256 of bin.
func Digest(bin []byte) string {
	h := sha256.Sum256(bin)
	return hex.EncodeToString(h[:])
}
