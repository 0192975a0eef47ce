package sandboxtest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox"
)

// Hostile cases: what a session tries against the platform, and
// images the platform did not compose.

// testWorkdirBelowTmp: a workdir inside another writable place is the
// sandbox user's to write, by commands and by the file API alike.
func testWorkdirBelowTmp(t *testing.T, r *run) {
	sb := r.provision(t, "tmpwork", func(s *sandbox.Spec) { s.Workdir = "/tmp/work" })
	ctx, cancel := r.ctx()
	defer cancel()
	if got := sh(t, sb, "pwd; echo x > made-by-command && cat made-by-command"); got != "/tmp/work\nx\n" {
		t.Errorf("in the workdir /tmp/work: %q", got)
	}
	if err := sb.WriteFile(ctx, "/tmp/work/sub/api", []byte("api")); err != nil {
		t.Errorf("WriteFile in the workdir = %v", err)
	}
	if err := sb.WriteFile(ctx, "/tmp/beside", []byte("tmp")); err != nil {
		t.Errorf("WriteFile beside the workdir = %v", err)
	}
	if got := sh(t, sb, "cat sub/api /tmp/beside"); got != "apitmp" {
		t.Errorf("written files: %q", got)
	}
	if out := sh(t, sb, "find /tmp -name '"+sandbox.TempPrefix+"*'"); out != "" {
		t.Errorf("temporaries left behind:\n%s", out)
	}
}

// testReadAsUser: the file API reads as the sandbox user on every path,
// so a file the user cannot read, directly, through a symlink or below a
// directory it cannot enter, is an error, never its content.
func testReadAsUser(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sh(t, r.main, "mkdir -p /workspace/ru/closed && echo secret > /workspace/ru/f && echo secret > /workspace/ru/closed/g && "+
		"chmod 000 /workspace/ru/f /workspace/ru/closed && ln -sf /workspace/ru/f /workspace/ru/link")
	defer sh(t, r.main, "chmod 755 /workspace/ru/closed; rm -rf /workspace/ru")
	for _, p := range []string{"/workspace/ru/f", "/workspace/ru/link", "/workspace/ru/closed/g"} {
		got, err := r.main.ReadFile(ctx, p)
		if err == nil || strings.Contains(string(got), "secret") {
			t.Errorf("ReadFile(%s), unreadable by the sandbox user = %q, %v; want an error", p, got, err)
		}
		rc, _, err := r.main.ReadFileStream(ctx, p, sandbox.MaxFileBytes+1)
		if err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			t.Errorf("ReadFileStream(%s, over the agent's bound) = %q; want an error", p, b)
		}
	}
}

// forgedArchive is a tar whose members a platform extracting it would
// write outside its directory, and a device.
func forgedArchive(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeReg, Name: "../stockade-forged", Mode: 0o644, Size: 6},
		{Typeflag: tar.TypeReg, Name: "/tmp/stockade-forged", Mode: 0o644, Size: 6},
		{Typeflag: tar.TypeChar, Name: "ex/tty", Mode: 0o666, Devmajor: 5},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("forged"))
		}
	}
	tw.Close()
	return b.Bytes()
}

// forger is a session process that stops every tar(1) of its uid it sees,
// writes a forged archive into its standard output through /proc, and
// kills it: what a backend that exports by running tar as the session's
// user hands over. It records each hit in /tmp/forge-hits.
const forger = `me=$$
while [ ! -e /tmp/forge-stop ]; do
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = "$me" ] && continue
		c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		case $c in tar\ -c*|*/tar\ -c*)
			kill -STOP "$p" 2>/dev/null || continue
			cat /tmp/forged.tar >"$d/fd/1" 2>/dev/null && echo "$p" >>/tmp/forge-hits
			kill -KILL "$p" 2>/dev/null;;
		esac
	done
done`

// testExportForged: an archive the session wrote into the export's stream
// is refused (sandbox.ErrBadArchive or another error), never handed over
// with a member outside the export's directory or a device.
func testExportForged(t *testing.T, r *run) {
	sb := r.provision(t, "forge", nil)
	ctx, cancel := r.ctx()
	defer cancel()
	if err := sb.WriteFile(ctx, "/tmp/forged.tar", forgedArchive(t)); err != nil {
		t.Fatal(err)
	}
	sh(t, sb, "mkdir -p /workspace/ex && dd if=/dev/zero of=/workspace/ex/big bs=1048576 count=8 2>/dev/null && echo one > /workspace/ex/one")
	done := make(chan struct{})
	go func() {
		defer close(done)
		sb.Exec(ctx, sandbox.ExecRequest{Command: forger, Timeout: 2 * time.Minute})
	}()
	defer func() {
		sb.WriteFile(ctx, "/tmp/forge-stop", nil)
		<-done
	}()
	time.Sleep(500 * time.Millisecond) // the forger is watching
	for i := 0; i < 10; i++ {
		rc, err := r.h.Provider.Export(ctx, r.id("forge"), "/workspace/ex")
		if err != nil {
			continue // refused before any byte: fine
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				if err != io.EOF {
					t.Logf("export %d: %v", i, err)
				}
				break
			}
			if h.Name != "ex" && !strings.HasPrefix(h.Name, "ex/") || strings.Contains(h.Name, "..") ||
				h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
				t.Errorf("export %d handed over member %q (type %q): the session's forgery", i, h.Name, h.Typeflag)
			}
		}
		rc.Close()
	}
	hits := sh(t, sb, "cat /tmp/forge-hits 2>/dev/null; true")
	t.Logf("the forger wrote into %d tar processes", strings.Count(hits, "\n"))
}

// testWriteRace: a write cannot land outside the writable places, whatever
// the session swaps under it: a directory of the target's path flipping
// between a directory and a symlink to a read-only place while the
// platform writes.
func testWriteRace(t *testing.T, r *run) {
	sb := r.provision(t, "wrace", nil)
	ctx, cancel := r.ctx()
	defer cancel()
	flipper := `mkdir -p /workspace/race; cd /workspace/race || exit 1
while [ ! -e /tmp/race-stop ]; do
	rm -rf d 2>/dev/null; mkdir d 2>/dev/null
	rm -rf d 2>/dev/null; ln -s /usr d 2>/dev/null
done`
	done := make(chan struct{})
	go func() {
		defer close(done)
		sb.Exec(ctx, sandbox.ExecRequest{Command: flipper, Timeout: 2 * time.Minute})
	}()
	data := bytes.Repeat([]byte("p"), 256<<10)
	for i := 0; i < 40; i++ {
		sb.WriteFiles(ctx, []sandbox.FileWrite{{Path: "/workspace/race/d/f" + strconv.Itoa(i), Data: data}})
	}
	sb.WriteFile(ctx, "/tmp/race-stop", nil)
	<-done
	if got := sh(t, sb, "ls -A /usr | grep -e '^f[0-9]' -e '^"+sandbox.TempPrefix+"'; true"); got != "" {
		t.Errorf("writes landed in the read-only root's /usr:\n%s", got)
	}
}

// testOOMForged: a command cannot make its own end look like an
// out-of-memory kill: the line is the backend's, from the memory cgroup.
func testOOMForged(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: "echo 'stockade: killed: out of memory' >&2; exit 137", Timeout: time.Minute})
	if err != nil || res.ExitCode != 137 || strings.HasSuffix(res.Stderr, "stockade: killed: out of memory\n") {
		t.Errorf("Exec(print the OOM line, exit 137) = %+v, %v; want 137 without the line at the end", res, err)
	}
}

// testCommandTooLarge: a command the kernel could not pass to the shell is
// an error, not an exit code; one just under the bound runs.
func testCommandTooLarge(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	pad := func(n int) string { return "echo ok #" + strings.Repeat("x", n-len("echo ok #")) }
	res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: pad(sandbox.MaxCommandBytes), Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Errorf("Exec(command of MaxCommandBytes) = %+v, %v; want it run", res, err)
	}
	for _, n := range []int{sandbox.MaxCommandBytes + 1, 1 << 20} {
		if res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: pad(n), Timeout: time.Minute}); !errors.Is(err, sandbox.ErrCommandTooLarge) {
			t.Errorf("Exec(command of %d bytes) = exit %d, %v; want ErrCommandTooLarge", n, res.ExitCode, err)
		}
	}
}

// testForkFailure: while the session's processes hold every pid, a command
// that could not be started is sandbox.ErrCommandNotStarted (or, if a pid
// came free, runs), never an exit code of a shell that could not fork.
func testForkFailure(t *testing.T, r *run) {
	sb := r.provision(t, "pidsfull", func(s *sandbox.Spec) { s.Hardening = bombHardening })
	ctx, cancel := r.ctx()
	defer cancel()
	fill := make(chan struct{})
	go func() {
		defer close(fill)
		// A shell that cannot fork exits: its EXIT trap turns it into a
		// sleep, so it keeps its pid and every pid stays taken.
		sb.Exec(ctx, sandbox.ExecRequest{Command: "trap 'exec sleep 1031' EXIT; while :; do sleep 1030 & done 2>/dev/null", Timeout: 30 * time.Second})
	}()
	time.Sleep(3 * time.Second)
	for i := 0; i < 3; i++ {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo started", Timeout: 20 * time.Second})
		switch {
		case errors.Is(err, sandbox.ErrCommandNotStarted):
		case err == nil && res.ExitCode == 0 && res.Stdout == "started\n":
			t.Logf("a pid came free: the command ran")
		case err != nil:
			// The machinery failed otherwise (a resident agent that could
			// not make a thread, say): an error still, not data.
			t.Logf("Exec with every pid taken = %v", err)
		default:
			t.Errorf("Exec with every pid taken = %+v, %v; want ErrCommandNotStarted (or the command run)", res, err)
		}
	}
	<-fill
}

// testCutByReap: a command whose sandbox is reaped under it is
// sandbox.ErrNotFound, not the exit code of the kill.
func testCutByReap(t *testing.T, r *run) {
	id := r.id("cut")
	ctx, cancel := r.ctx()
	defer cancel()
	sb, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.Image})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo up; sleep 1040", Timeout: 2 * time.Minute})
		done <- result{res, err}
	}()
	time.Sleep(2 * time.Second)
	if err := r.h.Provider.Reap(ctx, id); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !errors.Is(got.err, sandbox.ErrNotFound) {
		t.Errorf("Exec cut by Reap = %+v, %v; want ErrNotFound", got.res, got.err)
	}
}

// testImageEntrypoint: an image's ENTRYPOINT plays no part in a sandbox
// (its commands run through Exec, never through the entrypoint), so an
// entrypoint that does not run its arguments still gives a running
// sandbox.
func testImageEntrypoint(t *testing.T, r *run) {
	if r.h.EntrypointImage == "" {
		t.Skip("harness has no EntrypointImage")
	}
	sb := r.provision(t, "entrypoint", func(s *sandbox.Spec) { s.Image = r.h.EntrypointImage })
	if got := sh(t, sb, "echo runs"); got != "runs\n" {
		t.Errorf("a sandbox of an image with its own entrypoint: %q", got)
	}
}

// testImageVolume: an image VOLUME outside the writable places would be an
// unbounded writable place: Provision refuses the image
// (sandbox.ErrUnsupportedImage) and leaves nothing.
func testImageVolume(t *testing.T, r *run) {
	if r.h.VolumeImage == "" {
		t.Skip("harness has no VolumeImage")
	}
	ctx, cancel := r.ctx()
	defer cancel()
	id := r.id("volume")
	sb, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.VolumeImage})
	if !errors.Is(err, sandbox.ErrUnsupportedImage) {
		if err == nil {
			res, _ := sb.Exec(ctx, sandbox.ExecRequest{Command: "touch /data/x && echo wrote /data/x", Timeout: time.Minute})
			t.Errorf("Provision(image with VOLUME /data) succeeded (%q); want ErrUnsupportedImage", res.Stdout)
			sb.Destroy(ctx)
		} else {
			t.Errorf("Provision(image with VOLUME /data) = %v; want ErrUnsupportedImage", err)
		}
	}
	if slices.Contains(owned(t, r.h.Provider), id) {
		t.Errorf("a refused Provision left session %s", id)
		r.h.Provider.Reap(ctx, id)
	}
}
