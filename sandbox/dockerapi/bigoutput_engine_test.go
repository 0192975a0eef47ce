package dockerapi_test

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
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
	// bigOutput, in bytes. The client needs a copy buffer and the kept
	// bytes (under 2*bigCap as the Buffer grows); anything near bigOutput
	// means the stream was buffered.
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

// checkBig checks the capped stream and the heap.
func checkBig(t *testing.T, stdout, stderr *dockerapi.Buffer, total, peak uint64, took time.Duration) {
	t.Helper()
	t.Logf("read %d MiB in %v; allocated %.1f MiB, heap peak +%.1f MiB", stdout.Total()>>20, took.Round(time.Millisecond), float64(total)/(1<<20), float64(peak)/(1<<20))
	if got := stdout.Bytes(); len(got) != bigCap || !bytes.Equal(got, bigWant()) {
		t.Errorf("kept %d bytes (right content: %v); want exactly the first %d", len(got), bytes.Equal(got, bigWant()[:min(len(got), bigCap)]), bigCap)
	}
	if stdout.Total() != bigOutput || !stdout.Truncated() {
		t.Errorf("Total %d, Truncated %v; want %d, true", stdout.Total(), stdout.Truncated(), bigOutput)
	}
	if stderr.Total() != 0 {
		t.Errorf("stderr %q", stderr)
	}
	if total >= heapBudget {
		t.Errorf("allocated %d bytes while reading %d; want under %d", total, bigOutput, heapBudget)
	}
}

// bigOutputLogs follows the logs of a container writing 64 MiB.
func (f *fixture) bigOutputLogs(t *testing.T) {
	ctx := testContext(t)
	owner := enginetest.Owner(t)
	cfg := locked(owner, "sh", "-c", bigScript)
	// The engine keeps the logs the client reads: one file big enough for
	// all of them, since engines often rotate at a few MiB (ours at 10m, 3
	// files) and a follow across rotations drops and repeats lines.
	cfg.HostConfig.LogConfig = &dockerapi.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "128m", "max-file": "1"}}
	id := f.create(t, ctx, cfg)
	if err := f.c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := dockerapi.NewBuffer(bigCap), dockerapi.NewBuffer(bigCap)
	t0 := time.Now()
	var err error
	total, peak := heapUse(t, func() {
		err = f.c.ContainerLogs(ctx, id, dockerapi.LogsOptions{Stdout: true, Stderr: true, Follow: true}, stdout, stderr)
	})
	if err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	checkBig(t, stdout, stderr, total, peak, time.Since(t0))
	w, err := f.c.ContainerWait(ctx, id, dockerapi.WaitNotRunning)
	if err != nil || w.StatusCode != 0 {
		t.Errorf("ContainerWait = %+v, %v; want exit 0", w, err)
	}
	if j, err := f.c.ContainerInspect(ctx, id); err != nil || j.State.OOMKilled || j.State.ExitCode != 0 {
		t.Errorf("ContainerInspect = %+v, %v", j.State, err)
	}
}

// bigOutputExec reads 64 MiB of exec output through the hijacked stream,
// where nothing but the client drains the pipe: a client that stopped
// reading at the cap would leave the command blocked and this test hanging.
func (f *fixture) bigOutputExec(t *testing.T) {
	ctx := testContext(t)
	owner := enginetest.Owner(t)
	id := f.create(t, ctx, locked(owner, "sleep", "300"))
	if err := f.c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	eid, err := f.c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"sh", "-c", bigScript}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := dockerapi.NewBuffer(bigCap), dockerapi.NewBuffer(bigCap)
	t0 := time.Now()
	total, peak := heapUse(t, func() {
		err = f.c.ExecStart(ctx, eid, stdout, stderr)
	})
	if err != nil {
		t.Fatalf("ExecStart: %v", err)
	}
	checkBig(t, stdout, stderr, total, peak, time.Since(t0))
	in, err := f.c.ExecInspect(ctx, eid)
	if err != nil || in.Running || in.ExitCode == nil || *in.ExitCode != 0 {
		t.Errorf("ExecInspect = %+v, %v; want exit 0", in, err)
	}
}
