package docker

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// refusingExec is an engine whose ExecCreate fails at once: the upload's
// exec never reads the archive.
type refusingExec struct{ engine }

var errRefused = errors.New("refused")

func (refusingExec) ExecCreate(context.Context, string, dockerapi.ExecConfig) (string, error) {
	return "", errRefused
}

// TestPutWaitsForWriter checks that put returns only after the archive
// writer it started has returned, even when the upload fails before
// reading anything: the writer reads the caller's buffers, which the caller
// may reuse as soon as put returns. Run it with -race.
func TestPutWaitsForWriter(t *testing.T) {
	b := &box{p: &Provider{eng: refusingExec{}}, uid: 65534}
	var finished atomic.Bool
	write := func(w io.Writer) error {
		defer finished.Store(true)
		tw := tar.NewWriter(w)
		chunk := make([]byte, 32<<10)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 64 * int64(len(chunk))})
		for i := 0; i < 64 && err == nil; i++ {
			_, err = tw.Write(chunk)
		}
		// Linger, so a put that does not wait returns first.
		time.Sleep(50 * time.Millisecond)
		return err
	}
	err := b.put(context.Background(), "/workspace", write, "/workspace/big")
	if !errors.Is(err, errRefused) {
		t.Errorf("put = %v; want the engine's error", err)
	}
	if !finished.Load() {
		t.Errorf("put returned while its archive writer was still running")
	}
}

// TestPutAsUser: the upload without the agent extracts as the sandbox user.
// A member below a directory the session made a symlink to a place the user
// cannot write lands nowhere (issue 23, item 7: the engine's archive API,
// extracting as root, wrote such members into the read-only root's layer on
// the host's disk); a plain member lands, the user's.
func TestPutAsUser(t *testing.T) {
	ctx, b := session(t)
	sh(t, ctx, b, "ln -s /usr /workspace/lnk")
	archive := func(name string) func(io.Writer) error {
		return func(w io.Writer) error {
			tw := tar.NewWriter(w)
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 5}); err != nil {
				return err
			}
			if _, err := tw.Write([]byte("probe")); err != nil {
				return err
			}
			return tw.Close()
		}
	}
	err := b.put(ctx, "/workspace", archive("lnk/stockade-put-probe"), "/workspace/lnk/stockade-put-probe")
	if got := sh(t, ctx, b, "ls -A /usr"); strings.Contains(got, "stockade-put-probe") {
		t.Errorf("an upload through a symlink to /usr landed in /usr (put = %v)", err)
	}
	if err := b.put(ctx, "/workspace", archive("plain/f"), "/workspace/plain/f"); err != nil {
		t.Fatalf("put(plain/f) = %v", err)
	}
	if got := sh(t, ctx, b, "stat -c '%u %g' /workspace/plain/f /workspace/plain; cat /workspace/plain/f"); got != "65534 65534\n65534 65534\nprobe" {
		t.Errorf("an upload landed as %q; want the sandbox user's file and directory", got)
	}
}
