package kubernetes

import (
	"context"

	"github.com/stockade/stockade/sandbox"
)

// files is b's sandbox.FileScripts: each operation is one of the
// package's scripts run as the sandbox user in one exec.
func (b *box) files() sandbox.FileScripts {
	return sandbox.FileScripts{Backend: "kubernetes", Roots: b.roots,
		Run: func(ctx context.Context, outputCap int64, script string, args ...string) (int, string, string, error) {
			res, err := b.script(ctx, outputCap, script, args...)
			return res.code, res.stdout, res.stderr, err
		}}
}

// ListDir implements sandbox.Sandbox.
func (b *box) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return b.files().ListDir(ctx, p)
}

// Stat implements sandbox.Sandbox.
func (b *box) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	return b.files().Stat(ctx, p)
}

// MakeDir implements sandbox.Sandbox.
func (b *box) MakeDir(ctx context.Context, p string) error { return b.files().MakeDir(ctx, p) }

// Remove implements sandbox.Sandbox.
func (b *box) Remove(ctx context.Context, p string, opts sandbox.RemoveOptions) error {
	return b.files().Remove(ctx, p, opts)
}

// Rename implements sandbox.Sandbox.
func (b *box) Rename(ctx context.Context, from, to string) error {
	return b.files().Rename(ctx, from, to)
}
