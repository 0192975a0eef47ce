package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
	utilexec "k8s.io/client-go/util/exec"
)

// ReadFile implements sandbox.Sandbox.
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rc, size, err := b.ReadFileStream(ctx, p, sandbox.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("kubernetes: read %s: %w", p, err)
	}
	return buf, nil
}

// ReadFileStream implements sandbox.Sandbox with sandbox.ReadFileShell: one
// exec, whose output (at most maxBytes and the size line) is held in
// memory.
func (b *box) ReadFileStream(ctx context.Context, p string, maxBytes int64) (io.ReadCloser, int64, error) {
	if err := sandbox.CheckPath(p); err != nil {
		return nil, 0, fmt.Errorf("kubernetes: read: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = sandbox.MaxFileBytes
	}
	res, err := b.script(ctx, maxBytes+32, sandbox.ReadFileShell, p, strconv.FormatInt(maxBytes, 10))
	if err != nil {
		return nil, 0, err
	}
	body, err := sandbox.ReadFileResult("kubernetes", p, res.code, []byte(res.stdout), res.stderr, maxBytes)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
}

// WriteFile implements sandbox.Sandbox.
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	return b.WriteFiles(ctx, []sandbox.FileWrite{{Path: p, Data: data}})
}

// WriteFileStream implements sandbox.Sandbox.
func (b *box) WriteFileStream(ctx context.Context, p string, src io.Reader, size int64) error {
	buf, err := sandbox.ReadSource("kubernetes", p, src, size)
	if err != nil {
		return err
	}
	return b.WriteFile(ctx, p, buf)
}

// WriteFiles implements sandbox.Sandbox: per run of files in one writable
// place, one exec to prepare, one exec extracting the archive from its
// stdin, one exec to rename.
func (b *box) WriteFiles(ctx context.Context, files []sandbox.FileWrite) error {
	return sandbox.WriteRuns(ctx, "kubernetes", b.roots, files, b.bulk)
}

// bulk runs one BulkWrite (sandbox.BulkWrite.Run): prepare, upload,
// rename; discard on failure.
func (b *box) bulk(ctx context.Context, bw *sandbox.BulkWrite, files []sandbox.FileWrite) error {
	return bw.Run(ctx, "kubernetes", files, sandbox.BulkOps{
		Script: func(ctx context.Context, script string, args ...string) (int, string, string, error) {
			res, err := b.script(ctx, 0, script, args...)
			return res.code, res.stdout, res.stderr, err
		},
		Put:     b.put,
		Discard: b.discard,
	})
}

// put extracts the tar write produces in dir with tar(1) in the sandbox,
// as the sandbox user, from the exec's stdin. It returns only after write
// has ended, since write reads the caller's buffers.
func (b *box) put(ctx context.Context, dir string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pw.CloseWithError(write(pw))
	}()
	var stderr bytes.Buffer
	sctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	err := b.stream(sctx, sandboxContainer, sandbox.ExtractArgv(dir), pr, io.Discard, &limited{w: &stderr, n: 4 << 10})
	cancel()
	pr.CloseWithError(io.ErrClosedPipe)
	wg.Wait()
	var ee utilexec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return fmt.Errorf("kubernetes: %w", &sandbox.PathNotWritableError{Path: dir, Reason: "extracting the upload failed: " + strings.TrimSpace(stderr.String())})
	case isNotRunning(err):
		return fmt.Errorf("kubernetes: session %s: %w: %v", b.session, sandbox.ErrNotFound, err)
	default:
		return fmt.Errorf("kubernetes: upload to %s: %w", b.pod, err)
	}
}

// discard removes what bw delivered, on its own budget. Everything was
// extracted as the sandbox user, so it can remove all of it.
func (b *box) discard(ctx context.Context, bw *sandbox.BulkWrite) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardBudget)
	defer cancel()
	res, err := b.script(dctx, 0, sandbox.BulkDiscardShell, bw.Delivered()...)
	if err != nil {
		b.p.log.Warn("discard", "pod", b.pod, "err", err)
		return
	}
	if left := bw.LeftBehind(res.stdout); len(left) > 0 {
		b.p.log.Warn("discard left files behind", "pod", b.pod, "left", left)
	}
}

// limited is a writer that keeps the first n bytes and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(l.n, len(p))
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// Export implements sandbox.Provider with sandbox.ExportShell, streaming
// tar(1)'s output through sandbox.CheckArchive: tar runs as the session's
// user, whose processes can write into its output, so a forged member is
// sandbox.ErrBadArchive and never reaches the caller. It returns once the
// first bytes came (or the script ended): a missing root is then
// ErrFileNotExist.
func (p *Provider) Export(ctx context.Context, sessionID domain.ID, root string) (io.ReadCloser, error) {
	if err := sessionID.Validate(); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if err := sandbox.CheckPath(root); err != nil {
		return nil, fmt.Errorf("kubernetes: export: %w", err)
	}
	pod, err := p.find(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	b := p.box(pod, sessionID)
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	first := &firstWrite{w: pw, seen: make(chan struct{})}
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := b.stream(sctx, sandboxContainer, []string{"/bin/sh", "-c", sandbox.ExportShell, "stockade", root}, nil, first, &limited{w: &stderr, n: 4 << 10})
		done <- err
		var ee utilexec.ExitError
		switch {
		case err == nil:
			pw.Close()
		case errors.As(err, &ee):
			pw.CloseWithError(fmt.Errorf("kubernetes: export %s: tar exit %d: %s", root, ee.ExitStatus(), strings.TrimSpace(stderr.String())))
		default:
			pw.CloseWithError(fmt.Errorf("kubernetes: export %s: %w", root, err))
		}
	}()
	select {
	case <-first.seen:
		// tar runs as the session's user, which can write into its output
		// (/proc/PID/fd/1): every member is checked before it is passed on.
		return sandbox.CheckArchive(&exportReader{PipeReader: pr, cancel: cancel}, path.Base(root)), nil
	case err := <-done:
		defer cancel()
		var ee utilexec.ExitError
		if errors.As(err, &ee) && ee.ExitStatus() == sandbox.ExitFileNotExist {
			return nil, fmt.Errorf("kubernetes: export %s: %w", root, sandbox.ErrFileNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes: export %s: %w", root, err)
		}
		return nil, fmt.Errorf("kubernetes: export %s: tar wrote nothing", root)
	case <-ctx.Done():
		cancel()
		pr.Close()
		return nil, fmt.Errorf("kubernetes: export %s: %w", root, ctx.Err())
	}
}

// firstWrite passes writes on and closes seen at the first.
type firstWrite struct {
	w    io.Writer
	once sync.Once
	seen chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.seen) })
	}
	return f.w.Write(p)
}

// exportReader ends the stream when closed.
type exportReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *exportReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}
