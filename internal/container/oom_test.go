package container_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
)

func TestOOMStderr(t *testing.T) {
	line := container.OOMLine + "\n"
	for _, tt := range []struct {
		in   string
		oom  bool
		want string
	}{
		{"x\n", true, "x\n" + line},
		{"x\n" + line, true, "x\n" + line},
		{"x\n" + line, false, "x\n"},
		{line + line, false, ""},
		{"x\n", false, "x\n"},
		{"", true, line},
	} {
		if got := container.OOMStderr([]byte(tt.in), tt.oom); got != tt.want {
			t.Errorf("OOMStderr(%q, %v) = %q; want %q", tt.in, tt.oom, got, tt.want)
		}
	}
}

// TestOOMRecordVerdict: the record reads the check's exit codes.
func TestOOMRecordVerdict(t *testing.T) {
	var r container.OOMRecord
	seen := func() string { return r.Argv("c")[4] }
	for _, tt := range []struct {
		code    int
		oom, ok bool
		seen    string
	}{
		{10, false, true, "0"},   // unchanged
		{11, true, true, "1"},    // moved by one
		{13, true, true, "4"},    // by three more
		{10, false, true, "4"},   // unchanged again
		{137, false, false, "4"}, // the check was killed: no verdict
		{3, false, false, "4"},   // no count readable
		{60, false, true, "0"},   // a new cgroup at 0
		{62, true, true, "2"},    // a new cgroup with two
	} {
		if oom, ok := r.Verdict("c", tt.code); oom != tt.oom || ok != tt.ok || seen() != tt.seen {
			t.Errorf("Verdict(%d) = %v, %v, seen %s; want %v, %v, %s", tt.code, oom, ok, seen(), tt.oom, tt.ok, tt.seen)
		}
	}
	r.Forget("c")
	if seen() != "0" {
		t.Errorf("after Forget the record is %s; want 0", seen())
	}
}

// TestOOMCheck: the check, run in a container after a command, reports an
// OOM kill once, and a plain kill -9 not at all, whatever the command
// printed.
func TestOOMCheck(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	ctx := context.Background()
	var r container.OOMRecord
	check := func() bool {
		t.Helper()
		res, err := container.Exec(ctx, c, id, container.ExecSpec{Argv: r.Argv(id), User: "0:0", AsRoot: true, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		oom, ok := r.Verdict(id, res.ExitCode)
		if !ok {
			t.Fatalf("the check answered %d", res.ExitCode)
		}
		return oom
	}
	if check() {
		t.Errorf("a fresh container: OOM")
	}
	res, err := container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", `x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done`}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 137 {
		t.Fatalf("balloon = %+v, %v", res, err)
	}
	if !check() {
		t.Errorf("after a balloon: no OOM")
	}
	res, err = container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", "echo '" + container.OOMLine + "' >&2; exit 137"}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 137 {
		t.Fatalf("forger = %+v, %v", res, err)
	}
	if check() {
		t.Errorf("after a command that printed the OOM line: OOM")
	}
}

// TestExecStdin: a command reads the input Exec feeds it, through the
// engine; an engine that cannot feed it is refused before anything runs.
func TestExecStdin(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	in := strings.Repeat("0123456789", 100_000)
	res, err := container.Exec(context.Background(), c, id, container.ExecSpec{
		Argv: []string{"/bin/sh", "-c", `head -c "$1" | md5sum`, "x", strconv.Itoa(len(in))}, Stdin: strings.NewReader(in), Timeout: time.Minute,
	})
	sum := md5.Sum([]byte(in))
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), hex.EncodeToString(sum[:])) {
		t.Errorf("Exec with stdin = %q, %+v, %v; want the input's digest", res.Stdout, res, err)
	}
	_, err = container.Exec(context.Background(), noStdin{c}, id, container.ExecSpec{Argv: []string{"cat"}, Stdin: strings.NewReader("x")})
	if !errors.Is(err, container.ErrInvalidSpec) {
		t.Errorf("Exec with stdin through an engine without it = %v; want ErrInvalidSpec", err)
	}
}

// holdPids forks until the pids limit stops it, then holds its own pid (a
// shell that cannot fork exits; its EXIT trap turns it into a sleep).
const holdPids = `trap 'exec sleep 1000' EXIT; while :; do sleep 1000 & done 2>/dev/null`

// noStdin hides the engine's ExecStartStdin.
type noStdin struct{ container.ExecEngine }

// TestExecForkFailure: a wrapper that cannot fork its command (every pid
// of the container taken) is ErrNotStarted, not the shell's exit code 2.
func TestExecForkFailure(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	s := spec(t, c, "")
	s.Limits.PidsLimit = 16
	id := started(t, c, s)
	ctx := context.Background()
	fill := make(chan struct{})
	go func() {
		defer close(fill)
		container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", holdPids}, Timeout: 20 * time.Second,
			Policy: container.KillContainer})
	}()
	time.Sleep(3 * time.Second)
	res, err := container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", "echo started"}, Timeout: 10 * time.Second})
	if !errors.Is(err, container.ErrNotStarted) {
		t.Errorf("Exec with every pid taken = %+v, %v; want ErrNotStarted", res, err)
	}
	<-fill
}
