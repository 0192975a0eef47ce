package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// GateTag is the tag of the egress gate's image BuildGate makes.
const GateTag = "stockade/gate:local"

// GatePackage is the import path of the gate's main package.
const GatePackage = "github.com/stockade/stockade/cmd/stockade-gate"

// gateBuildTimeout bounds compiling the gate (a cold build cache takes the
// longest).
const gateBuildTimeout = 5 * time.Minute

// BuildGate compiles cmd/stockade-gate with the host's go command
// (CGO_ENABLED=0, -trimpath, so the binary is static and the same on every
// machine for the same source and Go) and composes it with the base layer
// (busybox, for the exec wrapper, and the CA bundle, for the control
// plane) into the gate image, tagged GateTag. The source is the
// github.com/stockade/stockade module the go command finds from the
// working directory: this repository, or a module that requires it. The
// result is loaded only when the engine lacks that image ID.
func BuildGate(ctx context.Context, eng Engine, opts Options) (Result, error) {
	var res Result
	err := withGate(ctx, opts, func(opts Options) (err error) {
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
	err := withGate(ctx, opts, func(opts Options) (err error) {
		res, err = WriteArchive(ctx, opts, w)
		return err
	})
	return res, err
}

// withGate compiles the gate into a temporary directory and calls compose
// with opts set to compose it (no Go, the gate as the program, GateTag
// unless opts names a tag); the directory goes when compose returns.
func withGate(ctx context.Context, opts Options, compose func(Options) error) error {
	bctx, cancel := context.WithTimeout(ctx, gateBuildTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "stockade-gate-build-")
	if err != nil {
		return fmt.Errorf("image: gate: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "stockade-gate")
	cmd := exec.CommandContext(bctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, GatePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image: gate: go build %s (run from a module that has it, or give GateSpec.Image): %w: %s",
			GatePackage, err, capString(strings.TrimSpace(stderr.String()), maxFetchStderr))
	}
	opts.NoGo, opts.Program = true, bin
	if opts.Tag == "" {
		opts.Tag = GateTag
	}
	return compose(opts)
}
