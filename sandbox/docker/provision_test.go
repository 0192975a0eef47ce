package docker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// fixture is one engine test's provider, image and engine client; every
// session it names is reaped at the end, and nothing of its owner may
// remain.
type fixture struct {
	p     *Provider
	c     *dockerapi.Client
	img   string
	calls *counting // exec and archive calls of p
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	p, calls := newProvider(t, owner)
	t.Cleanup(func() { reapAll(t, p, c) })
	return &fixture{p: p, c: c, img: img, calls: calls}
}

// reapAll reaps every session Owned lists, closes p's pool, and fails t
// if anything of p's owner is left.
func reapAll(t *testing.T, p *Provider, c *dockerapi.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids, err := p.Owned(ctx)
	if err != nil {
		t.Errorf("Owned() = %v", err)
	}
	for _, id := range ids {
		if err := p.Reap(ctx, id); err != nil {
			t.Errorf("Reap(%s) = %v", id, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if left, err := leftovers(c, p.owner)(ctx); err != nil || len(left) > 0 {
		t.Errorf("after the test, leftovers = %q, %v; want nothing", left, err)
	}
}

func (s *fixture) provision(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image = s.img
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := s.p.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision(%s) = %v", spec.SessionID, err)
	}
	return sb
}

// execIn runs cmd in sb and returns its result; an error fails t.
func execIn(t *testing.T, sb sandbox.Sandbox, cmd string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 50 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q) = %v", cmd, err)
	}
	return res
}

// TestProvisionAdoptKeepsContainerUser: re-Provision of a running session
// whose spec asks another uid adopts it (the uid is not part of what must
// match) and runs commands as the container's user, as Attach does.
func TestProvisionAdoptKeepsContainerUser(t *testing.T) {
	s := newFixture(t)
	id := domain.ID("adopt-uid")
	first, second := int64(4242), int64(5151)
	s.provision(t, sandbox.Spec{SessionID: id, Hardening: sandbox.Hardening{RunAsUser: &first, ReadOnlyRootfs: true}})
	again := s.provision(t, sandbox.Spec{SessionID: id, Hardening: sandbox.Hardening{RunAsUser: &second, ReadOnlyRootfs: true}})
	if got := strings.TrimSpace(execIn(t, again, "id -u").Stdout); got != "4242" {
		t.Errorf("after re-Provision asking uid %d, id -u = %q; want the container's 4242", second, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	att, err := s.p.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(execIn(t, att, "id -u").Stdout); got != "4242" {
		t.Errorf("Attach: id -u = %q; want 4242", got)
	}
}
func TestParseUID(t *testing.T) {
	for _, tt := range []struct {
		user string
		want int64
		ok   bool
	}{
		{"4242:4242", 4242, true},
		{"4242", 4242, true},
		{"", 0, false},
		{"nobody", 0, false},
		{"0:0", 0, false},
		{"-1:5", 0, false},
	} {
		got, err := parseUID(tt.user)
		if tt.ok && (err != nil || got != tt.want) || !tt.ok && err == nil {
			t.Errorf("parseUID(%q) = %d, %v; want %d (ok %v)", tt.user, got, err, tt.want, tt.ok)
		}
	}
}

// failingCreate makes the session container's create fail after running
// before, standing for a concurrent Provision in another process that won
// the race while this one's create failed for another reason.
type failingCreate struct {
	engine
	name   string
	before func()
	fired  bool
}

func (f *failingCreate) ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error) {
	if name != f.name || f.fired {
		return f.engine.ContainerCreate(ctx, name, cfg)
	}
	f.fired = true
	f.before()
	return "", &dockerapi.Error{Method: "POST", Path: "/containers/create", StatusCode: 500, Message: "injected failure"}
}

// TestFailedCreateRemovesOnlyItsOwn: a Provision whose create fails
// removes only what it created, never the container (and its files) a
// concurrent Provision in another process made under the same name.
func TestFailedCreateRemovesOnlyItsOwn(t *testing.T) {
	s := newFixture(t)
	id := domain.ID("failed-create")
	spec := sandbox.Spec{SessionID: id, Image: s.img}
	other, _ := newProvider(t, s.p.Owner())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var winner sandbox.Sandbox
	s.p.eng = &failingCreate{engine: s.p.eng, name: s.p.containerName(id), before: func() {
		sb, err := other.Provision(ctx, spec)
		if err != nil {
			t.Errorf("the other process's Provision = %v", err)
			return
		}
		winner = sb
		if err := sb.WriteFile(ctx, "/workspace/kept", []byte("kept")); err != nil {
			t.Errorf("WriteFile in the winner = %v", err)
		}
	}}
	if _, err := s.p.Provision(ctx, spec); err == nil {
		t.Fatalf("Provision with a failing create succeeded")
	}
	if winner == nil {
		t.Fatal("the other process's Provision did not run")
	}
	if got, err := winner.ReadFile(ctx, "/workspace/kept"); err != nil || string(got) != "kept" {
		t.Errorf("after the failed Provision, the winner's file = %q, %v; want it kept", got, err)
	}
	if res := execIn(t, winner, "echo alive"); res.Stdout != "alive\n" {
		t.Errorf("the winner's sandbox answers %+v; want it running", res)
	}
}

// TestOwnedListsOrphanVolumes: volumes a crash left between their creation
// and the container's belong to a session Owned lists and Reap removes.
func TestOwnedListsOrphanVolumes(t *testing.T) {
	s := newFixture(t)
	id := domain.ID("orphan-volumes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range sandbox.WritablePaths("") {
		if _, err := s.c.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: volumeName(s.p.containerName(id), i), Labels: s.p.labels(id)}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := s.p.Owned(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("Owned() = %q, %v; want it to list %s, which has only volumes", ids, err, id)
	}
	if err := s.p.Reap(ctx, id); err != nil {
		t.Fatalf("Reap(%s) = %v", id, err)
	}
	vs, err := s.c.VolumeList(ctx, dockerapi.LabelsFilter(s.p.labels(id)))
	if err != nil || len(vs) > 0 {
		t.Errorf("after Reap, the session's volumes = %v, %v; want none", vs, err)
	}
}

// TestStorageBound: a sandbox writes at most its EphemeralStorageBytes,
// split across the writable places; a write past it fails in the sandbox
// with ENOSPC, and the sandbox stays usable. A spec asking another bound
// does not adopt it.
func TestStorageBound(t *testing.T) {
	s := newFixture(t)
	id := domain.ID("storage")
	h := sandbox.Hardening{EphemeralStorageBytes: 8 << 20, ReadOnlyRootfs: true} // 4 MiB for /workspace, 4 for /tmp
	sb := s.provision(t, sandbox.Spec{SessionID: id, Hardening: h})
	for _, root := range []string{"/workspace", "/tmp"} {
		res := execIn(t, sb, "dd if=/dev/zero of="+root+"/big bs=1048576 count=6")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left") {
			t.Errorf("writing 6 MiB to %s under an 8 MiB bound: %+v; want a failure with no space left", root, res)
		}
		if res := execIn(t, sb, "rm "+root+"/big && echo small > "+root+"/small && cat "+root+"/small"); res.ExitCode != 0 || res.Stdout != "small\n" {
			t.Errorf("after the failed write, a small write to %s: %+v; want it to succeed", root, res)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.WriteFile(ctx, "/workspace/api", []byte("api")); err != nil {
		t.Errorf("WriteFile after the failed write = %v", err)
	}
	bigger := h
	bigger.EphemeralStorageBytes = 16 << 20
	if _, err := s.p.Provision(ctx, sandbox.Spec{SessionID: id, Image: s.img, Hardening: bigger}); !errors.Is(err, sandbox.ErrSpecMismatch) {
		t.Errorf("Provision asking another storage bound = %v; want ErrSpecMismatch", err)
	}
	// Files survive the container's stop: the keeper holds the volumes.
	if err := s.c.ContainerKill(ctx, s.p.containerName(id), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.ContainerWait(ctx, s.p.containerName(id), dockerapi.WaitNotRunning); err != nil {
		t.Fatal(err)
	}
	again := s.provision(t, sandbox.Spec{SessionID: id, Hardening: h})
	if res := execIn(t, again, "cat /workspace/small /workspace/api"); res.Stdout != "small\napi" {
		t.Errorf("after a stop and Provision, the files hold %q; want them kept", res.Stdout)
	}
	// The zero bound is the default, split in two.
	def := s.provision(t, sandbox.Spec{SessionID: "storage-default"})
	want := "size=" + strconv.Itoa(sandbox.DefaultEphemeralStorageBytes/2/1024) + "k"
	if res := execIn(t, def, "grep -E ' /(workspace|tmp) ' /proc/mounts"); strings.Count(res.Stdout, want) != 2 {
		t.Errorf("mounts of the default sandbox:\n%s\nwant /workspace and /tmp with %s", res.Stdout, want)
	}
}

// TestProvisionRunsNoSetup: the writable roots get their modes and owner
// (the sandbox user) when their volumes are mounted, so neither Provision
// nor a restart runs the setup exec, and the sandbox user can write them.
func TestProvisionRunsNoSetup(t *testing.T) {
	s := newFixture(t)
	// The agent's placement and launch are engine calls of their own
	// (agent_test.go); this is about setup.
	s.p.agent.off = true
	uid := int64(4242)
	sb := s.provision(t, sandbox.Spec{SessionID: "no-setup", Hardening: sandbox.Hardening{RunAsUser: &uid, ReadOnlyRootfs: true}})
	if n := s.calls.n.Load(); n != 0 {
		t.Errorf("Provision made %d exec or archive calls; want 0 (no setup exec)", n)
	}
	res := execIn(t, sb, "stat -c '%a %u' /workspace /tmp && echo x > /workspace/f && echo y > /tmp/f")
	if res.ExitCode != 0 || res.Stdout != "777 4242\n1777 4242\n" {
		t.Errorf("roots: %+v; want /workspace 777 and /tmp 1777, writable by uid %d", res, uid)
	}
}

// TestStorageBoundWithinMemory: with a small memory limit and no storage
// bound, a write that fills the disk is ENOSPC, not an out-of-memory kill
// of it and of every command after it (the volumes' pages count against
// the memory limit).
func TestStorageBoundWithinMemory(t *testing.T) {
	s := newFixture(t)
	sb := s.provision(t, sandbox.Spec{SessionID: "storage-memory", Hardening: sandbox.Hardening{MemoryBytes: 64 << 20, ReadOnlyRootfs: true}})
	res := execIn(t, sb, "dd if=/dev/zero of=/workspace/big bs=1048576 count=100")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left") {
		t.Errorf("writing 100 MiB under a 64 MiB memory limit: %+v; want a failure with no space left", res)
	}
	if res := execIn(t, sb, "echo alive; rm /workspace/big"); res.ExitCode != 0 || res.Stdout != "alive\n" {
		t.Errorf("after the full disk: %+v; want the sandbox usable", res)
	}
}

// TestAdoptOrCreate: the loop every deterministically named object goes
// through ends at the first settled look or create or the first error,
// creates only what a look found absent, and gives up with errUnsettled
// after its attempts.
func TestAdoptOrCreate(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name      string
		looks     []found // one per attempt; nil: no look
		creates   []found // one per create
		createErr error   // the last create's error
		want      error
		calls     string // l: look, c: create
	}{
		{"found", []found{settled}, nil, nil, nil, "l"},
		{"created", []found{absent}, []found{settled}, nil, nil, "lc"},
		{"lost the create, then adopted", []found{absent, settled}, []found{again}, nil, nil, "lcl"},
		{"not ready, then adopted", []found{again, settled}, nil, nil, nil, "ll"},
		{"create fails", []found{absent}, []found{absent}, boom, boom, "lc"},
		{"no look", nil, []found{again, settled}, nil, nil, "cc"},
		{"never settles", []found{again, again, again}, nil, nil, errUnsettled, "lll"},
	} {
		var calls string
		var look func(int) (found, error)
		if tt.looks != nil {
			look = func(attempt int) (found, error) {
				calls += "l"
				return tt.looks[attempt], nil
			}
		}
		create := func() (found, error) {
			calls += "c"
			f := tt.creates[strings.Count(calls, "c")-1]
			if strings.Count(calls, "c") == len(tt.creates) {
				return f, tt.createErr
			}
			return f, nil
		}
		err := adoptOrCreate(context.Background(), "x", 3, time.Millisecond, look, create)
		if !errors.Is(err, tt.want) || tt.want == nil && err != nil || calls != tt.calls {
			t.Errorf("%s: adoptOrCreate = %v after %q; want %v after %q", tt.name, err, calls, tt.want, tt.calls)
		}
	}
}
