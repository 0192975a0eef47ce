package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/internal/backend"
	utilexec "k8s.io/client-go/util/exec"
)

// put (backend.Ops.Put) extracts the tar write produces in dir with
// tar(1) in the sandbox, as the sandbox user, from the exec's stdin. It returns only after write
// has ended, since write reads the caller's buffers.
func (b *box) put(ctx context.Context, dir string, write func(io.Writer) error, _ string) error {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pw.CloseWithError(write(pw))
	}()
	var stderr bytes.Buffer
	sctx, cancel := context.WithTimeout(ctx, backend.ScriptTimeout)
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
