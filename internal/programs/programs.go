// Package programs ships the static Linux programs Stockade places in
// containers, the resident exec agent (cmd/stockade-agent) and the egress
// gate (cmd/stockade-gate), as bytes inside the binary that places them.
// Nothing at run time builds them: a program linking sandbox/docker, or the
// stockade command run from any directory, needs neither this source tree
// nor a Go toolchain to give a sandbox its agent or its gate.
//
// The binaries are committed, gzip-compressed (the gate links the
// OpenTelemetry SDK and is about 15 MB). TestProgramsAreBuilt rebuilds each
// from this tree with the host's go command and the flags in Build (static,
// CGO_ENABLED=0, -trimpath, no VCS stamp, no build ID, stripped) and fails
// unless the bytes are the same; `go generate ./internal/programs` (that
// test with -update) refreshes them after a change to the programs' code, a
// dependency they link, or a new Go release.
//
// Only linux/amd64 is shipped. On an engine of another architecture the
// Docker backend runs every command through the engine, as without an
// agent, and a gate needs an image of the caller's (ErrNotShipped).
package programs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
)

//go:generate go test -run TestProgramsAreBuilt -update .

// A Program is one of the programs this package ships.
type Program struct {
	// Name is the program's file name in an image, such as
	// "stockade-gate".
	Name string
	// Package is the import path of its main package.
	Package string

	gz   []byte // the committed file, gzip-compressed
	once sync.Once
	bin  []byte
	err  error
}

//go:embed stockade-agent-linux-amd64.gz
var agentGz []byte

//go:embed stockade-gate-linux-amd64.gz
var gateGz []byte

// The programs, built for linux/amd64.
var (
	Agent = &Program{Name: "stockade-agent", Package: "github.com/stockade/stockade/cmd/stockade-agent", gz: agentGz}
	Gate  = &Program{Name: "stockade-gate", Package: "github.com/stockade/stockade/cmd/stockade-gate", gz: gateGz}
)

// All lists every shipped program.
var All = []*Program{Agent, Gate}

// ErrNotShipped reports an architecture no program is shipped for.
var ErrNotShipped = errors.New("programs: no program shipped for this architecture")

// File is the name of p's committed file in this directory.
func (p *Program) File() string { return p.Name + "-linux-amd64.gz" }

// For returns p built for an engine of architecture arch (the engine's
// Info.Architecture, "x86_64", or a GOARCH, "amd64"). The bytes are
// decompressed once per process and shared: callers must not change them.
func (p *Program) For(arch string) ([]byte, error) {
	switch arch {
	case "x86_64", "amd64":
	default:
		return nil, fmt.Errorf("%w: %s for %q (only linux/amd64)", ErrNotShipped, p.Name, arch)
	}
	p.once.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(p.gz))
		if err != nil {
			p.err = fmt.Errorf("programs: %s: %w", p.Name, err)
			return
		}
		if p.bin, err = io.ReadAll(zr); err != nil {
			p.bin, p.err = nil, fmt.Errorf("programs: %s: %w", p.Name, err)
		}
	})
	return p.bin, p.err
}

// Digest returns the hex sha256 of bin.
func Digest(bin []byte) string {
	h := sha256.Sum256(bin)
	return hex.EncodeToString(h[:])
}
