package dockerapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

const (
	// bigOutput is what the container writes to stdout, in bytes.
	bigOutput = 64 << 20
	// bigCap is what the test keeps of it, in bytes.
	bigCap = 1 << 20
	// heapBudget bounds what the test process may allocate while reading
	// bigOutput from two streams, in bytes. Each needs a copy buffer and
	// its kept bytes, which cost about 5*bigCap as the Buffer grows by
	// append; a stream buffered whole would cost bigOutput by itself.
	heapBudget = 16 << 20
	// bigLine is the length of each line the container writes, newline
	// included: long lines keep the engine's JSON log small.
	bigLine = 4096
)

// bigScript writes bigOutput bytes of bigLine-byte lines of x with the
// shell's builtins only, so the pipe, not a tool, is what gets tested.
var bigScript = `l=x; i=0; while [ $i -lt 12 ]; do l=$l$l; i=$((i+1)); done; l=${l%x}
i=0; while [ $i -lt ` + strconv.Itoa(bigOutput/bigLine) + ` ]; do echo "$l"; i=$((i+1)); done`

// bigWant is what the capped stdout must hold: the first bigCap bytes.
func bigWant() []byte {
	line := strings.Repeat("x", bigLine-1) + "\n"
	return bytes.Repeat([]byte(line), bigCap/bigLine)
}

// heapUse measures what fn allocates on the heap. TotalAlloc counts every
// allocation, freed or not, so no collection between samples can hide a
// peak: a client that kept the 64 MiB, or allocated per frame, exceeds the
// budget however the GC runs. It is only meaningful when nothing else in the
// process runs, which is why the big-output tests are not parallel. The
// sampled HeapAlloc peak is logged as a second view.
func heapUse(t *testing.T, fn func()) (total, peak uint64) {
	t.Helper()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var m runtime.MemStats
		top := before.HeapAlloc
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- top - before.HeapAlloc
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapAlloc)
			}
		}
	}()
	fn()
	close(stop)
	peak = <-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, peak
}

// checkBig checks one capped stream.
func checkBig(t *testing.T, what string, stdout, stderr *dockerapi.Buffer) {
	t.Helper()
	if got := stdout.Bytes(); len(got) != bigCap || !bytes.Equal(got, bigWant()) {
		t.Errorf("%s: kept %d bytes (right content: %v); want exactly the first %d", what, len(got), bytes.Equal(got, bigWant()[:min(len(got), bigCap)]), bigCap)
	}
	if stdout.Total() != bigOutput || !stdout.Truncated() {
		t.Errorf("%s: Total %d, Truncated %v; want %d, true", what, stdout.Total(), stdout.Truncated(), bigOutput)
	}
	if stderr.Total() != 0 {
		t.Errorf("%s: stderr %q", what, stderr)
	}
}

// bigOutput reads 64 MiB from each of two streams at once, under a 1 MiB
// cap: the logs of a container that writes them, and the output of an exec
// that does. The exec's stream is a hijacked connection that only the client
// drains: a client that stopped reading at the cap would leave the command
// blocked on its pipe and the test hanging. The two share one heap
// measurement (run apart they take twice as long on a small machine); either
// one buffered would exceed the budget by itself.
func (f *fixture) bigOutput(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)

	cfg := locked(owner, "sh", "-c", bigScript)
	// The engine keeps the logs the client reads: one file big enough for
	// all of them, since engines often rotate at a few MiB (ours at 10m, 3
	// files) and a follow across rotations drops and repeats lines.
	cfg.HostConfig.LogConfig = &dockerapi.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "128m", "max-file": "1"}}
	logged := f.create(t, ctx, cfg)
	sleeper := f.create(t, ctx, locked(owner, "sleep", "300"))
	if err := c.ContainerStart(ctx, sleeper); err != nil {
		t.Fatal(err)
	}
	eid, err := c.ExecCreate(ctx, sleeper, dockerapi.ExecConfig{Cmd: []string{"sh", "-c", bigScript}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ContainerStart(ctx, logged); err != nil {
		t.Fatal(err)
	}

	logOut, logErr := dockerapi.NewBuffer(bigCap), dockerapi.NewBuffer(bigCap)
	execOut, execErr := dockerapi.NewBuffer(bigCap), dockerapi.NewBuffer(bigCap)
	var logsErr, execStartErr error
	var logsTook, execTook time.Duration
	t0 := time.Now()
	total, peak := heapUse(t, func() {
		var wg sync.WaitGroup
		wg.Go(func() {
			logsErr = c.ContainerLogs(ctx, logged, dockerapi.LogsOptions{Stdout: true, Stderr: true, Follow: true}, logOut, logErr)
			logsTook = time.Since(t0)
		})
		wg.Go(func() {
			execStartErr = c.ExecStart(ctx, eid, execOut, execErr)
			execTook = time.Since(t0)
		})
		wg.Wait()
	})
	t.Logf("read 2 × %d MiB (logs in %v, exec in %v); allocated %.1f MiB, heap peak +%.1f MiB",
		bigOutput>>20, logsTook.Round(time.Millisecond), execTook.Round(time.Millisecond), float64(total)/(1<<20), float64(peak)/(1<<20))
	if logsErr != nil {
		t.Errorf("ContainerLogs: %v", logsErr)
	}
	if execStartErr != nil {
		t.Errorf("ExecStart: %v", execStartErr)
	}
	checkBig(t, "logs", logOut, logErr)
	checkBig(t, "exec", execOut, execErr)
	if total >= heapBudget {
		t.Errorf("allocated %d bytes while reading 2 × %d; want under %d", total, bigOutput, heapBudget)
	}

	w, err := c.ContainerWait(ctx, logged, dockerapi.WaitNotRunning)
	if err != nil || w.StatusCode != 0 {
		t.Errorf("ContainerWait = %+v, %v; want exit 0", w, err)
	}
	if j, err := c.ContainerInspect(ctx, logged); err != nil || j.State.OOMKilled || j.State.ExitCode != 0 {
		t.Errorf("ContainerInspect = %+v, %v", j.State, err)
	}
	in, err := c.ExecInspect(ctx, eid)
	if err != nil || in.Running || in.ExitCode == nil || *in.ExitCode != 0 {
		t.Errorf("ExecInspect = %+v, %v; want exit 0", in, err)
	}
}

// TestHeapCheck runs the heap check against the fake engine and shows it
// can fail: a stream of heapBudget bytes read under the cap allocates a
// fraction of the budget, and read into an unbounded buffer, all of it.
func TestHeapCheck(t *testing.T) {
	const size = heapBudget
	f, c := newFake(t, "1.41")
	chunk := bytes.Repeat(frame(1, strings.Repeat("x", bigLine-1)+"\n"), 16) // 64 KiB of output
	f.handle("GET /containers/c1/logs", func(w http.ResponseWriter, r *http.Request) {
		for range size / (16 * bigLine) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	read := func(stdout io.Writer) uint64 {
		total, _ := heapUse(t, func() {
			if err := c.ContainerLogs(context.Background(), "c1", dockerapi.LogsOptions{Stdout: true}, stdout, nil); err != nil {
				t.Fatal(err)
			}
		})
		return total
	}
	capped := dockerapi.NewBuffer(bigCap)
	total := read(capped)
	if total >= heapBudget/2 || !bytes.Equal(capped.Bytes(), bigWant()) || capped.Total() != size {
		t.Errorf("capped read: allocated %d bytes, kept %d of %d; want under %d, %d", total, len(capped.Bytes()), capped.Total(), heapBudget/2, bigCap)
	}
	var whole bytes.Buffer
	if total := read(&whole); total < size || whole.Len() != size {
		t.Errorf("unbounded read allocated %d bytes for %d; the check would miss buffering", total, whole.Len())
	}
}
