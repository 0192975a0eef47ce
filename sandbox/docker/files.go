package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/agent"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/internal/backend"
)

// readAgent reads p through b's agent (agent.Conn.Read, in the agent's
// process, as the sandbox user), holding at most maxBytes and the size
// line. ok false means the agent did not answer for the file: none runs
// (one is launched for the next call), maxBytes is over maxAgentUpload,
// the agent cannot tell (a permission, a loop of links: the script says
// which), or it broke the protocol, hung or died (dropped): the caller
// reads with the script, as the same user.
func (b *box) readAgent(ctx context.Context, p string, maxBytes int64) (body []byte, ok bool, err error) {
	if maxBytes > maxAgentUpload {
		return nil, false, nil
	}
	c := b.p.agentConn(ctx, b)
	if c == nil {
		return nil, false, nil
	}
	out := dockerapi.NewBuffer(maxBytes + 32) // the size line: at most 20 digits and a newline
	k, err := c.Read(agent.ReadRequest{Path: p, Max: maxBytes}, out)
	if err != nil {
		return nil, false, nil
	}
	code, err := awaitAgentOp(ctx, c, k, agentFileBudget)
	switch {
	case ctx.Err() != nil:
		return nil, true, fmt.Errorf("docker: read %s: %w", p, ctx.Err())
	case err != nil:
		b.p.log.Debug("the agent did not read the file", "container", b.name, "err", err)
		return nil, false, nil
	case out.Truncated():
		c.Fail(fmt.Errorf("%w: a read of %s sent %d bytes, at most %d", agent.ErrProtocol, p, out.Total(), maxBytes+32))
		return nil, false, nil
	case code == agent.ExitReadRefused:
		return nil, false, nil
	}
	body, err = sandbox.ReadFileResult("docker", p, code, out.Bytes(), "", maxBytes)
	return body, true, err
}

// agentFileBudget bounds, on the host's clock, one file operation of the
// agent (a write or read of at most maxAgentUpload bytes, done in its own
// process): an agent that takes longer is taken for hung and dropped.
const agentFileBudget = 30 * time.Second

// awaitAgentOp waits for c's file operation k to end and returns its exit
// code. The agent has agentAckGrace to say it starts it and budget to end
// it; one that misses either, or ctx ending first, has its channel dropped
// (which kills it through the engine) and awaitAgentOp returns once k has
// ended, so nothing of the operation runs on. The error is k's (wrapping
// agent.ErrNotStarted or agent.ErrLost) or ctx's.
func awaitAgentOp(ctx context.Context, c *agent.Conn, k *agent.Call, budget time.Duration) (int, error) {
	ack := time.NewTimer(agentAckGrace)
	defer ack.Stop()
	end := time.NewTimer(budget)
	defer end.Stop()
	acked := k.Acked()
	for {
		select {
		case <-k.Done():
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return k.Result()
		case <-acked:
			ack.Stop()
			acked = nil
		case <-ack.C:
			c.Fail(fmt.Errorf("%w: no start of a file operation within %v", agent.ErrGone, agentAckGrace))
		case <-end.C:
			c.Fail(fmt.Errorf("%w: a file operation did not end within %v", agent.ErrGone, budget))
		case <-ctx.Done():
			c.Fail(fmt.Errorf("%w: a file operation's caller gave up: %v", agent.ErrGone, ctx.Err()))
			<-k.Done()
			return -1, ctx.Err()
		}
	}
}

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r *readCloser) Close() error { return r.c.Close() }

// lander is backend.Ops.Lander: land when b's agent runs and takes
// writes.
func (b *box) lander() func(context.Context, *sandbox.BulkWrite) (int, string, error) {
	if c := b.p.runningAgent(b); c != nil && c.Hello().Version >= agent.FileVersion {
		return b.land
	}
	return nil
}

// putFirst is backend.Ops.Put: through the agent (putAgent), else an
// engine exec (put).
func (b *box) putFirst(ctx context.Context, dir string, write func(io.Writer) error, target string) error {
	if err := b.putAgent(ctx, dir, write, target); !errors.Is(err, container.ErrNotStarted) {
		return err
	}
	return b.put(ctx, dir, write, target)
}

// land carries out bw in one step through b's agent (agent.Conn.Write:
// checks, parents, staging, modes and renames in the agent's process, as
// the sandbox user), for BulkOps.Land. A write over maxAgentUpload bytes,
// an agent gone, hung, refusing or breaking the protocol is
// sandbox.ErrNotLanded: the scripts do it.
func (b *box) land(ctx context.Context, bw *sandbox.BulkWrite) (int, string, error) {
	c := b.p.runningAgent(b)
	if c == nil {
		return 0, "", fmt.Errorf("%w: no agent runs in %s", sandbox.ErrNotLanded, b.name)
	}
	files, temp, mtime := bw.Plan()
	req := agent.WriteRequest{Temp: temp, MTime: mtime.Unix(), Files: make([]agent.WriteFile, len(files))}
	data := make([][]byte, len(files))
	total := 0
	for i, f := range files {
		req.Files[i], data[i] = agent.WriteFile{Path: f.Path, Size: int64(len(f.Data))}, f.Data
		total += len(f.Data)
	}
	if total > maxAgentUpload {
		return 0, "", fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrNotLanded, total, maxAgentUpload)
	}
	stderr := dockerapi.NewBuffer(backend.MaxScriptOutput)
	k, err := c.Write(req, data, stderr)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", sandbox.ErrNotLanded, err)
	}
	code, err := awaitAgentOp(ctx, c, k, agentFileBudget)
	switch {
	case ctx.Err() != nil:
		return 0, "", fmt.Errorf("docker: write in %s: %w", b.name, ctx.Err())
	case err != nil:
		return 0, "", fmt.Errorf("%w: %v", sandbox.ErrNotLanded, err)
	}
	return code, stderr.String(), nil
}

// maxAgentUpload bounds, in bytes, an archive put extracts through the
// agent (it travels in one request, and is held whole meanwhile); a larger
// one goes through the engine's archive API.
const maxAgentUpload = 16 << 20

// putAgent extracts the tar that write produces in dir with tar(1) run by
// the sandbox user, its stdin fed through the agent, as the Kubernetes
// backend extracts from its exec's stdin: every member is the user's. It is
// container.ErrNotStarted, with nothing extracted, when no agent runs, the
// archive is over maxAgentUpload, or the image has no tar (exit 127); a
// failed extraction is a PathNotWritableError for target.
func (b *box) putAgent(ctx context.Context, dir string, write func(io.Writer) error, target string) error {
	if b.p.runningAgent(b) == nil {
		return container.ErrNotStarted
	}
	// The archive whole, bounded by the one capped read; the writer ends
	// before putAgent goes on, since it reads the caller's buffers.
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(write(pw))
	}()
	archive, err := io.ReadAll(&dockerapi.CapReader{R: pr, N: maxAgentUpload})
	pr.CloseWithError(io.ErrClosedPipe) // write's next Write fails
	<-done
	switch {
	case errors.Is(err, dockerapi.ErrCapExceeded):
		return fmt.Errorf("%w: the archive is over %d bytes", container.ErrNotStarted, maxAgentUpload)
	case err != nil:
		return fmt.Errorf("docker: upload to %s: %w", b.name, err)
	}
	res, err := b.execIn(ctx, container.ExecSpec{Argv: sandbox.ExtractArgv(dir), User: b.user(),
		Timeout: backend.ScriptTimeout, OutputCap: backend.MaxScriptOutput}, archive)
	return b.extracted(res, err, target, fmt.Errorf("%w: no tar in the image", container.ErrNotStarted))
}

// put extracts the tar that write produces in dir with tar(1) run by the
// sandbox user in an engine exec, the archive on its stdin
// (sandbox.ExtractSizedArgv: the engine cannot end an exec's input, so the
// archive's size, counted by a first run of write, bounds what is read):
// every member is the user's, and lands where the user can write and
// nowhere else, whatever the session swaps under it. The engine's archive
// API, which extracts as root, is never used for the session's places. A
// failed extraction is a PathNotWritableError for target. It returns only
// after write has ended, since write reads the caller's buffers.
func (b *box) put(ctx context.Context, dir string, write func(io.Writer) error, target string) error {
	var size countWriter
	if err := write(&size); err != nil {
		return fmt.Errorf("docker: upload to %s: %w", b.name, err)
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(write(pw))
	}()
	res, err := b.engineExec(ctx, container.ExecSpec{Argv: sandbox.ExtractSizedArgv(dir, int64(size)), User: b.user(),
		Stdin: pr, Timeout: backend.ScriptTimeout, OutputCap: backend.MaxScriptOutput})
	pr.CloseWithError(io.ErrClosedPipe) // write's next Write fails
	<-done
	return b.extracted(res, err, target, fmt.Errorf("docker: upload to %s: the image has no tar(1) or head(1), which writes need when the agent cannot take them", b.name))
}

// extracted is put's and putAgent's answer for the extraction res (err
// its exec's error) of an upload whose first file is target: a failure is
// a PathNotWritableError for target, and exit 127 (no such program) is
// noTar.
func (b *box) extracted(res container.Result, err error, target string, noTar error) error {
	switch {
	case err != nil:
		return err
	case res.TimedOut:
		return fmt.Errorf("docker: upload to %s timed out after %v", b.name, backend.ScriptTimeout)
	case res.ExitCode == 127:
		return noTar
	case res.ExitCode != 0:
		return fmt.Errorf("docker: %w", &sandbox.PathNotWritableError{Path: target, Reason: "extracting the upload failed: " + strings.TrimSpace(string(res.Stderr))})
	}
	return nil
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
