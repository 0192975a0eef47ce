package backend

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/stockade/stockade/sandbox"
)

// ReadFile implements sandbox.Sandbox.
func (b *Box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rc, size, err := b.ReadFileStream(ctx, p, sandbox.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", b.Backend, p, err)
	}
	return buf, nil
}

// ReadFileStream implements sandbox.Sandbox. The file is read as the
// sandbox user on every path (symlinks followed inside the sandbox, with
// the user's permissions): by Read when it answers, else by
// sandbox.ReadFileShell, whose output (at most maxBytes and the size line)
// is held in memory. Never through an engine API that reads as root: a
// symlink the session planted would hand over what the user cannot read.
func (b *Box) ReadFileStream(ctx context.Context, p string, maxBytes int64) (io.ReadCloser, int64, error) {
	if err := sandbox.CheckPath(p); err != nil {
		return nil, 0, fmt.Errorf("%s: read: %w", b.Backend, err)
	}
	if maxBytes <= 0 {
		maxBytes = sandbox.MaxFileBytes
	}
	var body []byte
	ok, err := false, error(nil)
	if b.Read != nil {
		body, ok, err = b.Read(ctx, p, maxBytes)
	}
	if !ok {
		body, err = b.readScript(ctx, p, maxBytes)
	}
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
}

// readScript reads p with sandbox.ReadFileShell.
func (b *Box) readScript(ctx context.Context, p string, maxBytes int64) ([]byte, error) {
	res, err := b.Script(ctx, maxBytes+32, sandbox.ReadFileShell, p, strconv.FormatInt(maxBytes, 10))
	if err != nil {
		return nil, err
	}
	return sandbox.ReadFileResult(b.Backend, p, res.Code, []byte(res.Stdout), res.Stderr, maxBytes)
}

// WriteFile implements sandbox.Sandbox.
func (b *Box) WriteFile(ctx context.Context, p string, data []byte) error {
	return b.WriteFiles(ctx, []sandbox.FileWrite{{Path: p, Data: data}})
}

// WriteFileStream implements sandbox.Sandbox. The source is read whole
// (size is at most sandbox.MaxFileBytes) before anything is sent, so a
// source shorter or longer than size lands nothing and leaves nothing.
func (b *Box) WriteFileStream(ctx context.Context, p string, src io.Reader, size int64) error {
	buf, err := sandbox.ReadSource(b.Backend, p, src, size)
	if err != nil {
		return err
	}
	return b.WriteFile(ctx, p, buf)
}

// WriteFiles implements sandbox.Sandbox. Files go in runs of consecutive
// files in the same writable place, one BulkWrite each, run after run
// (sandbox.WriteRuns): a failure stops every file after it, whatever its
// place, as the interface promises.
func (b *Box) WriteFiles(ctx context.Context, files []sandbox.FileWrite) error {
	return sandbox.WriteRuns(ctx, b.Backend, b.Roots, files, b.bulk)
}

// bulk runs one BulkWrite (sandbox.BulkWrite.Run): in one step through the
// Lander's lander when there is one, else prepare, Put, rename; discard on
// failure.
func (b *Box) bulk(ctx context.Context, bw *sandbox.BulkWrite, files []sandbox.FileWrite) error {
	ops := sandbox.BulkOps{
		Script: func(ctx context.Context, script string, args ...string) (int, string, string, error) {
			res, err := b.Script(ctx, 0, script, args...)
			return res.Code, res.Stdout, res.Stderr, err
		},
		Put: func(ctx context.Context, dir string, write func(io.Writer) error) error {
			return b.Put(ctx, dir, write, files[0].Path)
		},
		Discard: b.discard,
	}
	if b.Lander != nil {
		ops.Land = b.Lander()
	}
	return bw.Run(ctx, b.Backend, files, ops)
}

// discard removes what bw delivered, on DiscardBudget. Everything was
// extracted as the sandbox user, so it can remove all of it; what it could
// not (the session's own doing) is logged.
func (b *Box) discard(ctx context.Context, bw *sandbox.BulkWrite) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DiscardBudget)
	defer cancel()
	res, err := b.Script(dctx, 0, sandbox.BulkDiscardShell, bw.Delivered()...)
	if err != nil {
		b.log().Warn("discard", "err", err)
		return
	}
	if left := bw.LeftBehind(res.Stdout); len(left) > 0 {
		b.log().Warn("discard left files behind", "left", left)
	}
}
