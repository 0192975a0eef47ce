package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/programs"
)

// BuildGate composes the gate program this binary carries
// (programs.Gate: cmd/stockade-gate, static) with the base layer (busybox,
// for the exec wrapper, and the CA bundle, for the control plane) into
// the gate image, tagged gate.Image unless opts names a tag. No Go toolchain
// and no source tree is needed. The result is loaded only when the engine
// lacks that image ID.
func BuildGate(ctx context.Context, eng Engine, opts Options) (Result, error) {
	var res Result
	err := withGate(opts, func(opts Options) (err error) {
		res, err = Build(ctx, eng, opts)
		return err
	})
	return res, err
}

// WriteGateArchive is BuildGate writing the image as a docker-archive to w
// instead of loading it into an engine (WriteArchive): what
// scripts/kube-up imports into the Kubernetes node's containerd.
func WriteGateArchive(ctx context.Context, opts Options, w io.Writer) (Result, error) {
	var res Result
	err := withGate(opts, func(opts Options) (err error) {
		res, err = WriteArchive(ctx, opts, w)
		return err
	})
	return res, err
}

// withGate writes the shipped gate program for this host's architecture
// into a temporary file and calls compose with opts set to compose it (no
// Go, the gate as the program, gate.Image unless opts names a tag); the file
// goes when compose returns.
func withGate(opts Options, compose func(Options) error) error {
	bin, err := programs.Gate.For(runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("image: gate: %w (give the gate's image instead)", err)
	}
	dir, err := os.MkdirTemp("", "stockade-gate-")
	if err != nil {
		return fmt.Errorf("image: gate: %w", err)
	}
	defer os.RemoveAll(dir)
	prog := filepath.Join(dir, programs.Gate.Name)
	if err := os.WriteFile(prog, bin, 0o755); err != nil {
		return fmt.Errorf("image: gate: %w", err)
	}
	opts.NoGo, opts.Program = true, prog
	if opts.Tag == "" {
		opts.Tag = gate.Image
	}
	return compose(opts)
}
