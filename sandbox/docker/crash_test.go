package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// The crash tests run a session provider in a child process (this test
// binary, re-executed into TestCrashHelperProcess), SIGKILL it in the middle
// of a call, and check that a new provider of the same owner finds and
// reaps everything the dead one left: after Owned and Reap, no container,
// volume or network carries the owner's label.
//
// The child says what it is about to do on stdout, one line "crash: WHAT"
// right before each call, and "crash: error ..." when a call fails.

// Environment of the helper process.
const (
	crashModeEnv    = "STOCKADE_CRASH_MODE" // provision, write or exec; unset: not a helper
	crashOwnerEnv   = "STOCKADE_CRASH_OWNER"
	crashImageEnv   = "STOCKADE_CRASH_IMAGE"
	crashSessionEnv = "STOCKADE_CRASH_SESSION"
)

// Bounds of the crash tests.
const (
	// crashHelperLife bounds the helper process: if the test never kills
	// it, it exits on its own after this.
	crashHelperLife = 3 * time.Minute
	// crashLineWait bounds the wait for one line of the helper, which
	// may first provision a sandbox.
	crashLineWait = 2 * time.Minute
	// crashReapWait bounds Owned, Reap and the check after them.
	crashReapWait = 2 * time.Minute
	// crashWriteFiles is how many files the killed WriteFiles writes, in
	// runs of crashWriteRun consecutive files per writable place, so the
	// write takes several rounds of execs and uploads.
	crashWriteFiles = 2000
	crashWriteRun   = 500
	// crashSleep is the command the killed Exec runs.
	crashSleep = "sleep 600"
)

// crashSession is the session every crash test provisions, each with an
// owner of its own.
const crashSession = domain.ID("crash")

// TestCrashHelperProcess is not a test: it is the provider process the
// crash tests kill. It does nothing unless crashModeEnv is set.
func TestCrashHelperProcess(t *testing.T) {
	mode := os.Getenv(crashModeEnv)
	if mode == "" {
		return
	}
	os.Exit(crashHelper(mode))
}

// crashHelper provisions session crashSession of the owner the test gave,
// then, by mode, writes many files or runs crashSleep, and waits to be
// killed.
func crashHelper(mode string) int {
	say := func(format string, args ...any) { fmt.Printf("crash: "+format+"\n", args...) }
	ctx, cancel := context.WithTimeout(context.Background(), crashHelperLife)
	defer cancel()
	p, err := New(Config{Owner: os.Getenv(crashOwnerEnv)})
	if err != nil {
		say("error %v", err)
		return 1
	}
	// NetUnrestricted, so the owner's network is among what a crash can
	// leave.
	spec := sandbox.Spec{SessionID: domain.ID(os.Getenv(crashSessionEnv)), Image: os.Getenv(crashImageEnv),
		Networking: domain.Networking{Type: domain.NetUnrestricted}}
	say("provision")
	sb, err := p.Provision(ctx, spec)
	if err != nil {
		say("error %v", err)
		return 1
	}
	switch mode {
	case "provision":
	case "write":
		files := make([]sandbox.FileWrite, crashWriteFiles)
		for i := range files {
			place := []string{"/workspace", "/tmp"}[i/crashWriteRun%2]
			files[i] = sandbox.FileWrite{Path: fmt.Sprintf("%s/crash/d%d/f%d", place, i%10, i), Data: []byte(strings.Repeat("x", 512))}
		}
		say("write")
		err = sb.WriteFiles(ctx, files)
	case "exec":
		say("exec")
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: crashSleep, Timeout: crashHelperLife})
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		say("error %v", err)
		return 1
	}
	say("done")
	<-ctx.Done()
	return 2
}

// crashChild is a running helper process.
type crashChild struct {
	cmd   *exec.Cmd
	lines chan string // its stdout, closed at EOF
}

// startCrashChild starts the helper in mode for owner.
func startCrashChild(t *testing.T, mode, owner, img string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashModeEnv+"="+mode, crashOwnerEnv+"="+owner, crashImageEnv+"="+img, crashSessionEnv+"="+string(crashSession))
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { c.kill(t) })
	return c
}

// waitFor waits for the helper's line "crash: what".
func (c *crashChild) waitFor(t *testing.T, what string) {
	t.Helper()
	bound := time.NewTimer(crashLineWait)
	defer bound.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			switch {
			case !ok:
				t.Fatalf("the helper ended before saying %q", what)
			case l == "crash: "+what:
				return
			case strings.HasPrefix(l, "crash: error"):
				t.Fatalf("the helper, before %q: %s", what, l)
			}
		case <-bound.C:
			t.Fatalf("the helper did not say %q within %v", what, crashLineWait)
		}
	}
}

// kill SIGKILLs the helper and waits for it. It reports whether the kill
// is what ended it (false: it had exited, or was killed already), and the
// helper's lines since the last waitFor.
func (c *crashChild) kill(t *testing.T) (byKill bool, said []string) {
	t.Helper()
	if c.cmd.ProcessState != nil {
		return false, nil
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill the helper: %v", err)
	}
	for l := range c.lines {
		said = append(said, l)
	}
	err := c.cmd.Wait()
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, said
}

// reapOwner checks what a restarted process can clean up after the
// helper's crash. Right away, as after a fast restart, a new provider of
// owner lists the sessions it owns and reaps each: nothing it could see
// may be left. A request the dead process had in flight can still complete
// in the engine afterwards (a network create does), so once the owner's
// objects have stopped changing, a second Owned and Reap (the next
// restart, or a periodic sweep) must leave nothing with the owner's label.
// It returns what the crash had left, for the log.
func reapOwner(t *testing.T, c *dockerapi.Client, owner string) (left []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crashReapWait)
	defer cancel()
	list := func() []string {
		l, err := leftovers(c, owner)(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(l)
		return l
	}
	p, _ := newProvider(t, owner)
	sweep := func() []domain.ID {
		ids, err := p.Owned(ctx)
		if err != nil {
			t.Fatalf("Owned() = %v", err)
		}
		for _, id := range ids {
			if err := p.Reap(ctx, id); err != nil {
				t.Errorf("Reap(%s) = %v", id, err)
			}
		}
		return ids
	}

	left = list()
	ids := sweep()
	for _, o := range list() {
		if slices.Contains(left, o) {
			t.Errorf("the crash left %q; Owned() = %q; after reaping those, %s is still there", left, ids, o)
		}
	}
	late := settle(t, list)
	ids = sweep()
	if after := list(); len(after) > 0 {
		t.Errorf("the crash left %q, then %q appeared; after a second Owned() = %q and Reap, still left: %q; want nothing", left, late, ids, after)
	} else if len(late) > 0 {
		t.Logf("a request in flight at the kill completed after the first reap, making %q; the second sweep removed it", late)
	}
	return left
}

// Bounds of settle: the owner's objects count as settled when a listing
// has not changed for crashQuiet; settle gives up after crashSettle.
const (
	crashQuiet  = time.Second
	crashSettle = 20 * time.Second
)

// settle waits until list's answer has not changed for crashQuiet, and
// returns it.
func settle(t *testing.T, list func() []string) []string {
	t.Helper()
	last, since := list(), time.Now()
	bound := time.Now().Add(crashSettle)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(since) < crashQuiet {
		if time.Now().After(bound) {
			t.Fatalf("the owner's objects kept changing for %v: %q", crashSettle, last)
		}
		<-tick.C
		if l := list(); !slices.Equal(l, last) {
			last, since = l, time.Now()
		}
	}
	return last
}

// removeOwned removes, after a test, whatever still carries owner's label
// (nothing, when it passed).
func removeOwned(t *testing.T, c *dockerapi.Client, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), crashReapWait)
	defer cancel()
	f := dockerapi.LabelFilter(label.Owner + "=" + owner)
	cs, _ := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: f})
	for _, x := range cs {
		if x.Labels[label.Owner] == owner {
			c.ContainerRemove(ctx, x.ID, dockerapi.RemoveOptions{Force: true})
		}
	}
	vs, _ := c.VolumeList(ctx, f)
	for _, v := range vs {
		if v.Labels[label.Owner] == owner {
			c.VolumeRemove(ctx, v.Name, true)
		}
	}
	ns, _ := c.NetworkList(ctx, f)
	for _, n := range ns {
		if n.Labels[label.Owner] == owner {
			c.NetworkRemove(ctx, n.ID)
		}
	}
}

// TestCrashProvision kills the provider process at several moments of a
// Provision (after 0 to 400 ms of it; a Provision takes about a second),
// so that some kills land between the volumes, the network, the keeper and
// the container; and once as soon as the engine lists the first container,
// which it does while it is still creating it.
func TestCrashProvision(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	t.Cleanup(func() { removeOwned(t, c, owner) })
	for _, ms := range []int{0, 20, 50, 100, 200, 400, -1} {
		name := strconv.Itoa(ms) + "ms"
		if ms < 0 {
			name = "first container listed"
		}
		t.Run(name, func(t *testing.T) {
			child := startCrashChild(t, "provision", owner, img)
			child.waitFor(t, "provision")
			if ms >= 0 {
				time.Sleep(time.Duration(ms) * time.Millisecond) // the moment of the kill, not a wait for anything
			} else {
				waitListed(t, c, owner)
			}
			byKill, said := child.kill(t)
			left := reapOwner(t, c, owner)
			t.Logf("killed at %s of Provision (by the kill: %v; it said %q after starting it); it had made %q", name, byKill, said, left)
		})
	}
}

// waitListed waits until the engine lists a container of owner.
func waitListed(t *testing.T, c *dockerapi.Client, owner string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crashLineWait)
	defer cancel()
	for {
		cs, err := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelFilter(label.Owner + "=" + owner)})
		if err != nil {
			t.Fatalf("waiting for a container to be listed: %v", err)
		}
		if len(cs) > 0 {
			return
		}
	}
}

// TestCrashWriteFiles kills the provider process during a WriteFiles of
// crashWriteFiles files across both writable places.
func TestCrashWriteFiles(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	t.Cleanup(func() { removeOwned(t, c, owner) })
	for _, ms := range []int{50, 300} {
		t.Run(strconv.Itoa(ms)+"ms", func(t *testing.T) {
			child := startCrashChild(t, "write", owner, img)
			child.waitFor(t, "write")
			time.Sleep(time.Duration(ms) * time.Millisecond) // the moment of the kill, not a wait for anything
			byKill, said := child.kill(t)
			t.Logf("killed %v into WriteFiles (by the kill: %v; it said %q after starting it); files in the sandbox: %s", time.Duration(ms)*time.Millisecond, byKill, said, landed(t, owner))
			reapOwner(t, c, owner)
		})
	}
}

// landed counts, for the log, the files in the writable places of the
// helper's session, staging files included.
func landed(t *testing.T, owner string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := newProvider(t, owner)
	sb, err := p.Attach(ctx, crashSession)
	if err != nil {
		return err.Error()
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "find /workspace /tmp -type f | wc -l", Timeout: 30 * time.Second})
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(res.Stdout) + " of " + strconv.Itoa(crashWriteFiles)
}

// TestCrashExec kills the provider process while an Exec of crashSleep
// runs in its sandbox: the command outlives the process, and Reap must
// still remove everything.
func TestCrashExec(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	t.Cleanup(func() { removeOwned(t, c, owner) })
	child := startCrashChild(t, "exec", owner, img)
	child.waitFor(t, "exec")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := newProvider(t, owner)
	sb, err := p.Attach(ctx, crashSession)
	if err != nil {
		t.Fatal(err)
	}
	// The command runs once a process's argv is exactly crashSleep (the
	// probe's own argv holds the pattern, never the command).
	probe := sandbox.ExecRequest{Command: `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f"; echo; done | grep -qx '` + crashSleep + ` '`, Timeout: 30 * time.Second}
	running := func() bool {
		res, err := sb.Exec(ctx, probe)
		if err != nil {
			t.Fatalf("looking for %q: %v", crashSleep, err)
		}
		return res.ExitCode == 0
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !running() {
		select {
		case <-ctx.Done():
			t.Fatalf("%q never ran in the sandbox", crashSleep)
		case <-tick.C:
		}
	}
	if byKill, said := child.kill(t); !byKill {
		t.Errorf("the helper ended before the kill (it said %q)", said)
	}
	t.Logf("%q still runs after its provider was killed: %v", crashSleep, running())
	reapOwner(t, c, owner)
}

// TestCrashOrphanNetwork leaves what a crash can leave and a restart cannot
// reach through a session: the owner's network with no session container
// or volume left (a Reap killed after removing those; a network create the
// dead process had in flight, completing after the restarted process's
// Reap). Owned must remove it, since no session is there for Reap.
func TestCrashOrphanNetwork(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	t.Cleanup(func() { removeOwned(t, c, owner) })
	p, _ := newProvider(t, owner)
	ctx, cancel := context.WithTimeout(context.Background(), crashReapWait)
	defer cancel()
	if _, err := p.Provision(ctx, sandbox.Spec{SessionID: crashSession, Image: img, Networking: domain.Networking{Type: domain.NetUnrestricted}}); err != nil {
		t.Fatal(err)
	}
	// Remove the session's containers and volumes, not its network, as a
	// Reap killed between the two would.
	f := dockerapi.LabelFilter(label.Owner + "=" + owner)
	cs, err := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		if err := c.ContainerRemove(ctx, x.ID, dockerapi.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := c.VolumeList(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if err := c.VolumeRemove(ctx, v.Name, true); err != nil {
			t.Fatal(err)
		}
	}
	left, err := leftovers(c, owner)(ctx)
	if err != nil || len(left) != 1 || !strings.HasPrefix(left[0], "network ") {
		t.Fatalf("set-up: leftovers = %q, %v; want the owner's network alone", left, err)
	}

	restarted, _ := newProvider(t, owner)
	ids, err := restarted.Owned(ctx)
	if err != nil || len(ids) != 0 {
		t.Errorf("Owned() = %q, %v; want no session", ids, err)
	}
	if after, err := leftovers(c, owner)(ctx); err != nil || len(after) > 0 {
		t.Errorf("after Owned(), leftovers = %q, %v; want nothing (the orphaned network removed)", after, err)
	}
}
