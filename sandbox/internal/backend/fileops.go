package backend

import (
	"context"

	"github.com/stockade/stockade/sandbox"
)

// files is b's sandbox.FileScripts: each operation is one of the sandbox
// package's scripts, run as the sandbox user through Script.
func (b *Box) files() sandbox.FileScripts {
	return sandbox.FileScripts{Backend: b.Backend, Roots: b.Roots,
		Run: func(ctx context.Context, outputCap int64, script string, args ...string) (int, string, string, error) {
			res, err := b.Script(ctx, outputCap, script, args...)
			return res.Code, res.Stdout, res.Stderr, err
		}}
}

// ListDir implements sandbox.Sandbox.
func (b *Box) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return b.files().ListDir(ctx, p)
}

// Stat implements sandbox.Sandbox.
func (b *Box) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	return b.files().Stat(ctx, p)
}

// MakeDir implements sandbox.Sandbox.
func (b *Box) MakeDir(ctx context.Context, p string) error { return b.files().MakeDir(ctx, p) }

// Remove implements sandbox.Sandbox.
func (b *Box) Remove(ctx context.Context, p string, opts sandbox.RemoveOptions) error {
	return b.files().Remove(ctx, p, opts)
}

// Rename implements sandbox.Sandbox.
func (b *Box) Rename(ctx context.Context, from, to string) error {
	return b.files().Rename(ctx, from, to)
}
