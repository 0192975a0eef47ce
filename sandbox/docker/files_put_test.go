package docker

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// refusingPut is an engine whose ArchivePut fails at once, without reading
// the archive.
type refusingPut struct{ engine }

var errRefused = errors.New("refused")

func (refusingPut) ArchivePut(context.Context, string, string, io.Reader, dockerapi.PutOptions) error {
	return errRefused
}

// TestPutWaitsForWriter checks that put returns only after the archive
// writer it started has returned, even when the upload fails before
// reading anything: the writer reads the caller's buffers, which the caller
// may reuse as soon as put returns. Run it with -race.
func TestPutWaitsForWriter(t *testing.T) {
	b := &box{p: &Provider{eng: refusingPut{}}, uid: 65534}
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
	err := b.put(context.Background(), "/workspace", write)
	if !errors.Is(err, errRefused) {
		t.Errorf("put = %v; want the engine's error", err)
	}
	if !finished.Load() {
		t.Errorf("put returned while its archive writer was still running")
	}
}
