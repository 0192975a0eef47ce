// Package sandboxtest is the contract every sandbox backend must pass: Run
// exercises each semantic of the sandbox package, including the hostile
// cases (fork bombs, memory balloons, output floods, escaping children,
// writes to read-only places, bad environment names, racing provisions),
// as subtests against a real backend.
//
// The suite creates its own sandboxes with session ids unique to the run
// and removes them; at the end Harness.Leftovers must report nothing.
package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/sandbox"
)

// Harness is what a backend gives the suite.
type Harness struct {
	// Provider is the backend under test. Its owner must be unique to the
	// run: the suite checks Owned and Leftovers against it.
	Provider sandbox.Provider
	// Other is a second provider with the same owner, standing for another
	// process; nil runs the cross-process race with Provider alone.
	Other sandbox.Provider
	// Image is present in the backend and has a BusyBox-compatible
	// /bin/sh with id, ps, sleep, setsid, dd, head, stat, mkfifo, find, md5sum,
	// truncate, grep, tr, xargs, tar and kill; for the gate cases (Gate set), also
	// a `busybox` with wget, nc (with -e), nslookup and ssl_client.
	Image string
	// OtherImage is a second image (another ID) for the spec-mismatch
	// case; "" skips that part.
	OtherImage string
	// Stop stops a session's sandbox without removing it; nil skips the
	// cases about stopped sandboxes.
	Stop func(ctx context.Context, id domain.ID) error
	// Squat makes an object that takes the name the backend would give
	// session id's sandbox, without the backend's ownership labels, and
	// returns its remover; nil skips that case.
	Squat func(ctx context.Context, id domain.ID) (remove func(), err error)
	// RoundTrips returns how many engine calls the backend has made so
	// far; nil skips the constant-round-trips check.
	RoundTrips func() int64
	// Leftovers lists what the owner still has in the backend
	// (containers, volumes, networks); Run fails if anything remains
	// after the suite.
	Leftovers func(ctx context.Context) ([]string, error)
	// Timeout bounds each engine operation of the suite; zero means 3
	// minutes.
	Timeout time.Duration
	// NetUnrestrictedRefused says the backend, on this engine, cannot keep
	// NetUnrestricted sandboxes from reaching each other and so refuses
	// them: the suite then checks that Provision answers
	// sandbox.ErrNetworkingUnsupported and leaves nothing.
	NetUnrestrictedRefused bool
	// Gate is the upstream the gate cases reach. Nil means the backend
	// does not support NetLimited: Provision must refuse it with
	// sandbox.ErrNetworkingUnsupported. With it, the backend must either
	// refuse so (on this engine) or pass every gate case; such a backend's
	// Provider must also implement EgressLogger.
	Gate *GateHarness
	// Disrupt, when set, runs before every case with the suite's main
	// sandbox: a backend with a resident agent kills it there, from inside
	// the session, so the cases run while the backend finds it gone and
	// falls back (and launches another).
	Disrupt func(t *testing.T, sb sandbox.Sandbox)
	// EntrypointImage is Image with an ENTRYPOINT that does not run its
	// arguments (/bin/true); "" skips the case that a sandbox of it runs.
	EntrypointImage string
	// VolumeImage is Image with a VOLUME outside the writable places
	// (/data); "" skips the case that Provision refuses it.
	VolumeImage string
	// Close, when set, runs after the suite's sessions are reaped and
	// before Leftovers is checked: it removes what the provider keeps
	// that is no session's (a warm pool), which must leave nothing.
	Close func(ctx context.Context) error
	// Kernel says how the sandboxes' kernel departs from the host's, as
	// runc gives it, in what the suite can observe; the zero value is
	// runc's.
	Kernel KernelDifferences
}

// KernelDifferences are what a sandbox runtime with a kernel of its own
// (gVisor's runsc) shows or does otherwise than runc. Each relaxes the
// cases it names, as documented here, and nothing else; docs/SECURITY.md
// says what each means for the guarantee.
type KernelDifferences struct {
	// PidsLimitHidden: the sandbox's own /sys/fs/cgroup does not show the
	// pids limit (gVisor's cgroup files are its own; the engine applies
	// the limit to the sandbox's processes on the host). Hardening/Applied
	// then does not read pids.max; Exec/ForkBombContained still proves a
	// bomb is held.
	PidsLimitHidden bool
	// OOMEndsSandbox: a command past the memory limit ends every process
	// of the sandbox, not itself alone (under gVisor the host's OOM killer
	// takes the sandbox's kernel, and the memory cgroup inside keeps no
	// oom_kill count to attribute). Exec/MemoryBalloonOOM then asks that
	// the balloon's Exec end (not with exit 0: 137, or an error) within its
	// timeout's budget and that the sandbox runs commands again after it,
	// instead of the out-of-memory line.
	OOMEndsSandbox bool
	// FloodBytes is how much Exec/OutputFloodCapped writes to stdout; 0
	// means 1 GiB. Under gVisor pipes inside the sandbox are slower (about
	// 20 MB/s on a loaded 2-core machine): 256 MiB there still floods
	// past every cap the case checks (the output cap, and the 128 MiB the
	// host may allocate).
	FloodBytes int64
}

// The hardenings of the cases that provision their own sandbox.
var (
	bombHardening = sandbox.Hardening{PidsLimit: 64, ReadOnlyRootfs: true}
	oomHardening  = sandbox.Hardening{MemoryBytes: 32 << 20, ReadOnlyRootfs: true}
)

func customHardening() sandbox.Hardening {
	uid := int64(4242)
	return sandbox.Hardening{RunAsUser: &uid, PidsLimit: 100, MemoryBytes: 128 << 20, CPUMillis: 1 << 40, ReadOnlyRootfs: true}
}

// mainEnv is the environment of the suite's main sandbox.
func mainEnv() map[string]string { return map[string]string{"GREETING": "hello world", "EMPTY": ""} }

// Specs returns the specs, but for their session IDs, of the sandboxes the
// suite provisions with networking none, for image: its main sandbox, the
// plain spec most cases use, and the hardened, fork-bomb and memory cases'.
// A backend that keeps sandboxes warm pools them, so those cases run on
// sandboxes from its pool.
func Specs(image string) []sandbox.Spec {
	return []sandbox.Spec{
		{Image: image, Env: mainEnv()},
		{Image: image},
		{Image: image, Hardening: customHardening()},
		{Image: image, Hardening: bombHardening},
		{Image: image, Hardening: oomHardening},
	}
}

// run is the state one Run shares among its subtests.
type run struct {
	h      Harness
	prefix string // of every session id of this run
	main   sandbox.Sandbox
	spec   sandbox.Spec
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 3 * time.Minute
	}
	var b [4]byte
	rand.Read(b[:])
	r := &run{h: h, prefix: "st-" + hex.EncodeToString(b[:])}
	t.Cleanup(func() { r.cleanup(t) })

	ctx, cancel := r.ctx()
	r.spec = sandbox.Spec{SessionID: r.id("main"), Image: h.Image, Env: mainEnv()}
	t.Setenv("STOCKADE_SUITE_HOST_SECRET", "leaked") // must never reach a sandbox
	sb, err := h.Provider.Provision(ctx, r.spec)
	cancel()
	if err != nil {
		t.Fatalf("Provision(main) = %v", err)
	}
	r.main = sb

	for _, tc := range []struct {
		name string
		f    func(*testing.T, *run)
	}{
		{"Provision/Idempotent", testIdempotent},
		{"Provision/ConcurrentConverge", testConcurrent},
		{"Provision/SpecMismatch", testSpecMismatch},
		{"Provision/RefusesBadSpec", testBadSpec},
		{"Provision/FreshAfterReuse", testFresh},
		{"Gate", testGate},
		{"Provision/ForeignNameRefused", testForeignName},
		{"Provision/ImageEntrypoint", testImageEntrypoint},
		{"Provision/ImageVolumeRefused", testImageVolume},
		{"Provision/StartsStopped", testStopped},
		{"Hardening/Applied", testHardening},
		{"Hardening/Environment", testEnvironment},
		{"Networking/None", testNetNone},
		{"Networking/Unrestricted", testNetUnrestricted},
		{"Exec/Basics", testExecBasics},
		{"Exec/Concurrent", testExecConcurrent},
		{"Exec/TimeoutKillsEscapedTree", testTimeoutTree},
		{"Exec/CancelKills", testCancel},
		{"Exec/OutputFloodCapped", testFlood},
		{"Exec/ForkBombContained", testForkBomb},
		{"Exec/MemoryBalloonOOM", testOOM},
		{"Exec/OOMLineNotForged", testOOMForged},
		{"Exec/CommandTooLarge", testCommandTooLarge},
		{"Exec/ForkFailureIsError", testForkFailure},
		{"Exec/CutByReap", testCutByReap},
		{"Files/RoundTrip", testFileRoundTrip},
		{"Files/ReadErrors", testReadErrors},
		{"Files/WriteErrors", testWriteErrors},
		{"Files/WriteIsAtomic", testAtomic},
		{"Files/WriteFileStream", testWriteStream},
		{"Files/WriteFiles", testWriteFiles},
		{"Files/WriteFilesStopsAtFirstFailure", testWriteFilesFailure},
		{"Files/WriteFilesConstantRoundTrips", testRoundTrips},
		{"Files/WorkdirBelowTmp", testWorkdirBelowTmp},
		{"Files/ReadAsSandboxUser", testReadAsUser},
		{"Files/WriteRaceStaysInside", testWriteRace},
		{"Files/ListAndStat", testListStat},
		{"Files/ListAndStatErrors", testListStatErrors},
		{"Files/OpsRefuseBadPaths", testFileOpsRefuseBadPaths},
		{"Files/MakeDirRemoveRename", testFileChanges},
		{"Export", testExport},
		{"Export/ForgedArchiveRefused", testExportForged},
		{"Attach", testAttach},
		{"OwnedAndReap", testOwnedReap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if h.Disrupt != nil {
				h.Disrupt(t, r.main)
			}
			tc.f(t, r)
		})
	}
}

func (r *run) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.h.Timeout)
}

func (r *run) id(name string) domain.ID { return domain.ID(r.prefix + "-" + name) }

// cleanup reaps every session of the run and checks nothing is left.
func (r *run) cleanup(t *testing.T) {
	ctx, cancel := r.ctx()
	defer cancel()
	owned, err := r.h.Provider.Owned(ctx)
	if err != nil {
		t.Errorf("Owned() = %v", err)
	}
	for _, id := range owned {
		if strings.HasPrefix(string(id), r.prefix) {
			if err := r.h.Provider.Reap(ctx, id); err != nil {
				t.Errorf("Reap(%s) = %v", id, err)
			}
		}
	}
	if r.h.Close != nil {
		if err := r.h.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	if r.h.Leftovers != nil {
		left, err := r.h.Leftovers(ctx)
		if err != nil || len(left) > 0 {
			t.Errorf("after the suite, Leftovers() = %q, %v; want nothing", left, err)
		}
	}
}

// provision provisions a fresh sandbox for one subtest and destroys it at
// its end.
func (r *run) provision(t *testing.T, name string, mod func(*sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	spec := sandbox.Spec{SessionID: r.id(name), Image: r.h.Image}
	if mod != nil {
		mod(&spec)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	sb, err := r.h.Provider.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision(%s) = %v", spec.SessionID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := r.ctx()
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("Destroy(%s) = %v", spec.SessionID, err)
		}
	})
	return sb
}

// sh runs cmd in sb and fails t unless it exits 0; it returns stdout.
func sh(t *testing.T, sb sandbox.Sandbox, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 50 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v, %v; want exit 0", cmd, res, err)
	}
	return res.Stdout
}

func owned(t *testing.T, p sandbox.Provider) []domain.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := p.Owned(ctx)
	if err != nil {
		t.Fatalf("Owned() = %v", err)
	}
	return ids
}

func testIdempotent(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	again, err := r.h.Provider.Provision(ctx, r.spec)
	if err != nil || again.ID() != r.main.ID() {
		t.Fatalf("second Provision = %v, %v; want the same sandbox %s", again, err, r.main.ID())
	}
	sh(t, r.main, "echo marker > /tmp/idem")
	if got := sh(t, again, "cat /tmp/idem"); got != "marker\n" {
		t.Errorf("the second handle sees %q; want the first's file", got)
	}
	if ids := owned(t, r.h.Provider); !slices.Contains(ids, r.spec.SessionID) {
		t.Errorf("Owned() = %q; want it to hold %s", ids, r.spec.SessionID)
	}
}

func testConcurrent(t *testing.T, r *run) {
	spec := sandbox.Spec{SessionID: r.id("race"), Image: r.h.Image}
	other := r.h.Other
	if other == nil {
		other = r.h.Provider
	}
	ctx, cancel := r.ctx()
	defer cancel()
	const n = 4
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := r.h.Provider
			if i%2 == 1 {
				p = other
			}
			sb, err := p.Provision(ctx, spec)
			errs[i] = err
			if err == nil {
				ids[i] = sb.ID()
			}
		}()
	}
	wg.Wait()
	defer r.h.Provider.Reap(ctx, spec.SessionID)
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("concurrent Provision %d = %q, %v; want every call to return %q", i, ids[i], errs[i], ids[0])
		}
	}
	sb, err := r.h.Provider.Attach(ctx, spec.SessionID)
	if err != nil || sb.ID() != ids[0] {
		t.Fatalf("Attach = %v, %v; want %s", sb, err, ids[0])
	}
	sh(t, sb, "true")
}

func testSpecMismatch(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sh(t, r.main, "echo keep > /workspace/mismatch-keep")
	cases := []sandbox.Spec{
		{SessionID: r.spec.SessionID, Image: r.spec.Image, Workdir: "/src"},
		{SessionID: r.spec.SessionID, Image: r.spec.Image, Networking: domain.Networking{Type: domain.NetUnrestricted}},
	}
	if r.h.OtherImage != "" {
		cases = append(cases, sandbox.Spec{SessionID: r.spec.SessionID, Image: r.h.OtherImage})
	}
	for _, spec := range cases {
		if _, err := r.h.Provider.Provision(ctx, spec); !errors.Is(err, sandbox.ErrSpecMismatch) {
			t.Errorf("Provision(image %s, workdir %q, net %q) over an existing sandbox = %v; want ErrSpecMismatch", spec.Image, spec.Workdir, spec.Networking.Mode(), err)
		}
	}
	// Nothing was removed or changed.
	if got := sh(t, r.main, "cat /workspace/mismatch-keep"); got != "keep\n" {
		t.Errorf("after the mismatches the sandbox holds %q", got)
	}
	// The same spec written differently still matches.
	same := r.spec
	same.Workdir = sandbox.DefaultWorkdir
	same.Networking = domain.Networking{Type: domain.NetNone}
	if sb, err := r.h.Provider.Provision(ctx, same); err != nil || sb.ID() != r.main.ID() {
		t.Errorf("Provision with explicit defaults = %v; want the existing sandbox", err)
	}
}

// testFresh: a sandbox provisioned after another was destroyed, under the
// same session ID and spec, carries nothing of it: no file in any
// writable place, no process, not the same sandbox. (A backend that keeps
// sandboxes warm must never hand one out twice.)
func testFresh(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	spec := sandbox.Spec{SessionID: r.id("fresh"), Image: r.h.Image}
	first, err := r.h.Provider.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision = %v", err)
	}
	// A file in every writable place, and a process that outlives its
	// command.
	places := strings.Join(sandbox.WritablePaths(sandbox.DefaultWorkdir), " ")
	sh(t, first, "for d in "+places+"; do echo previous > $d/.stockade-previous; done; "+
		"setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo started")
	left := func(sb sandbox.Sandbox) string {
		return sh(t, sb, "for d in "+places+"; do ls -A $d | grep -x .stockade-previous; done; "+
			"ps -o pid,args | grep 'sleep 3600' | grep -v grep; true")
	}
	// The check below can see them.
	if got := left(first); strings.Count(got, ".stockade-previous") != len(sandbox.WritablePaths(sandbox.DefaultWorkdir)) || !strings.Contains(got, "sleep 3600") {
		t.Fatalf("the first sandbox shows %q; want its markers and its sleep", got)
	}
	if err := first.Destroy(ctx); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	second, err := r.h.Provider.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("second Provision = %v", err)
	}
	defer second.Destroy(ctx)
	if second.ID() == first.ID() {
		t.Errorf("the second Provision returned the destroyed sandbox %s", first.ID())
	}
	if got := left(second); strings.TrimSpace(got) != "" {
		t.Errorf("a fresh sandbox holds what the destroyed one left:\n%s", got)
	}
}

// testBadSpec: Provision refuses each malformed Spec with the error that
// names what is wrong (matched with errors.Is, as callers branch on it)
// and leaves nothing.
func testBadSpec(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	ro := func(h sandbox.Hardening) sandbox.Hardening { h.ReadOnlyRootfs = true; return h }
	bad := []struct {
		name string
		spec sandbox.Spec
		want error // nil: any error (the engine's or cluster's own refusal)
	}{
		{"env name with =", sandbox.Spec{Env: map[string]string{"A=B": "x"}}, sandbox.ErrInvalidEnv},
		{"env name with NUL", sandbox.Spec{Env: map[string]string{"A\x00B": "x"}}, sandbox.ErrInvalidEnv},
		{"env value with NUL", sandbox.Spec{Env: map[string]string{"A": "x\x00y"}}, sandbox.ErrInvalidEnv},
		{"empty env name", sandbox.Spec{Env: map[string]string{"": "x"}}, sandbox.ErrInvalidEnv},
		{"reserved env name", sandbox.Spec{Env: map[string]string{"STOCKADE_X": "x"}}, sandbox.ErrInvalidEnv},
		{"reserved proxy name", sandbox.Spec{Env: map[string]string{"https_proxy": "http://evil"}}, sandbox.ErrInvalidEnv},
		{"relative workdir", sandbox.Spec{Workdir: "work"}, sandbox.ErrInvalidSpec},
		{"root workdir", sandbox.Spec{Workdir: "/"}, sandbox.ErrInvalidSpec},
		{"unclean workdir", sandbox.Spec{Workdir: "/a/../b"}, sandbox.ErrInvalidSpec},
		{"root user", sandbox.Spec{Hardening: ro(sandbox.Hardening{RunAsUser: new(int64)})}, sandbox.ErrInvalidHardening},
		{"negative memory", sandbox.Spec{Hardening: ro(sandbox.Hardening{MemoryBytes: -1})}, sandbox.ErrInvalidHardening},
		{"memory below the minimum", sandbox.Spec{Hardening: ro(sandbox.Hardening{MemoryBytes: 1 << 20})}, sandbox.ErrInvalidHardening},
		{"negative pids limit", sandbox.Spec{Hardening: ro(sandbox.Hardening{PidsLimit: -1})}, sandbox.ErrInvalidHardening},
		{"storage above half the memory", sandbox.Spec{Hardening: ro(sandbox.Hardening{MemoryBytes: 64 << 20, EphemeralStorageBytes: 48 << 20})}, sandbox.ErrInvalidHardening},
		{"writable root", sandbox.Spec{Hardening: sandbox.Hardening{MemoryBytes: 256 << 20}}, sandbox.ErrInvalidHardening},
		{"no image", sandbox.Spec{Image: "-"}, sandbox.ErrInvalidSpec},
		{"missing image", sandbox.Spec{Image: "stockade/does-not-exist:never"}, nil},
		{"bad networking", sandbox.Spec{Networking: domain.Networking{Type: "bogus"}}, domain.ErrInvalidNetworking},
		{"allowed hosts without NetLimited", sandbox.Spec{Networking: domain.Networking{Type: domain.NetUnrestricted, AllowedHosts: []string{"example.com"}}}, domain.ErrInvalidNetworking},
		{"gate without NetLimited", sandbox.Spec{Gate: &sandbox.GateSpec{}}, sandbox.ErrInvalidGate},
	}
	for i, tc := range bad {
		spec := tc.spec
		spec.SessionID = r.id("bad" + strconv.Itoa(i))
		switch spec.Image {
		case "":
			spec.Image = r.h.Image
		case "-":
			spec.Image = ""
		}
		sb, err := r.h.Provider.Provision(ctx, spec)
		switch {
		case err == nil:
			sb.Destroy(ctx)
			t.Errorf("Provision(%s) succeeded; want an error", tc.name)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("Provision(%s) = %v; want %v", tc.name, err, tc.want)
		}
		if ids := owned(t, r.h.Provider); slices.Contains(ids, spec.SessionID) {
			t.Errorf("Provision(%s) failed but left a sandbox", tc.name)
			r.h.Provider.Reap(ctx, spec.SessionID)
		}
	}
	if _, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: "../x", Image: r.h.Image}); !errors.Is(err, domain.ErrInvalidID) {
		t.Errorf("Provision with session id ../x = %v; want domain.ErrInvalidID", err)
	}
}

func testNetLimited(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	limited := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"proxy.golang.org"}}
	for _, gate := range []*sandbox.GateSpec{nil, {Image: r.h.Image}} {
		id := r.id("limited")
		_, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.Image, Networking: limited, Gate: gate})
		if !errors.Is(err, sandbox.ErrNetworkingUnsupported) {
			t.Errorf("Provision(NetLimited, gate %v) = %v; want ErrNetworkingUnsupported", gate != nil, err)
		}
		if slices.Contains(owned(t, r.h.Provider), id) {
			t.Errorf("a refused NetLimited Provision left a sandbox")
			r.h.Provider.Reap(ctx, id)
		}
	}
}

func testForeignName(t *testing.T, r *run) {
	if r.h.Squat == nil {
		t.Skip("harness has no Squat")
	}
	ctx, cancel := r.ctx()
	defer cancel()
	id := r.id("squat")
	remove, err := r.h.Squat(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if sb, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.Image}); err == nil {
		t.Errorf("Provision over a foreign object of the same name = %s; want an error", sb.ID())
	}
	if _, err := r.h.Provider.Attach(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach of a foreign object = %v; want ErrNotFound", err)
	}
	if err := r.h.Provider.Reap(ctx, id); err == nil {
		// Reap may succeed (nothing of ours) or refuse; it must not remove.
		t.Logf("Reap of a foreign name: nil")
	}
}

func testStopped(t *testing.T, r *run) {
	if r.h.Stop == nil {
		t.Skip("harness has no Stop")
	}
	sb := r.provision(t, "stopped", nil)
	sh(t, sb, "echo persisted > /workspace/p")
	ctx, cancel := r.ctx()
	defer cancel()
	id := r.id("stopped")
	if err := r.h.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.h.Provider.Attach(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach of a stopped sandbox = %v; want ErrNotFound", err)
	}
	if ids := owned(t, r.h.Provider); !slices.Contains(ids, id) {
		t.Errorf("Owned() = %q; want it to list the stopped %s", ids, id)
	}
	// Export works while stopped, and Attach did not start it.
	rc, err := r.h.Provider.Export(ctx, id, "/workspace")
	if err != nil {
		t.Fatalf("Export of a stopped sandbox = %v", err)
	}
	files := readTar(t, rc)
	if files["workspace/p"] != "persisted\n" {
		t.Errorf("Export of a stopped sandbox = %q; want workspace/p", keys(files))
	}
	if _, err := r.h.Provider.Attach(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach after Export = %v; want ErrNotFound (still stopped)", err)
	}
	again, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.Image})
	if err != nil {
		t.Fatalf("Provision of a stopped sandbox = %v", err)
	}
	if again.ID() != sb.ID() {
		t.Errorf("Provision of a stopped sandbox gave %s; want the same %s", again.ID(), sb.ID())
	}
	if got := sh(t, again, "cat /workspace/p"); got != "persisted\n" {
		t.Errorf("after restart /workspace/p = %q", got)
	}
}

func testHardening(t *testing.T, r *run) {
	out := sh(t, r.main, "id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")
	for _, want := range []string{"65534\n65534\n", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want) {
			t.Errorf("identity and capabilities:\n%s\nwant %q", out, want)
		}
	}
	ctx, cancel := r.ctx()
	defer cancel()
	for _, p := range []string{"/etc/stockade-probe", "/stockade-probe", "/usr/stockade-probe", "/bin/stockade-probe"} {
		res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: "echo x > " + p, Timeout: time.Minute})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("writing %s: %+v, %v; want a failure (read-only root)", p, res, err)
		}
	}
	for _, p := range sandbox.WritablePaths("") {
		sh(t, r.main, "echo x > "+p+"/probe && rm "+p+"/probe")
	}
	// The limits are the defaults: the pids and memory cgroup files say so.
	lim := sh(t, r.main, "cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; true")
	pids := strconv.Itoa(sandbox.DefaultPidsLimit) + "\n"
	if r.h.Kernel.PidsLimitHidden {
		pids = ""
	}
	if !strings.Contains(lim, pids) || !strings.Contains(lim, strconv.Itoa(1<<30)+"\n") {
		t.Errorf("cgroup limits:\n%s\nwant pids %d and memory %d", lim, sandbox.DefaultPidsLimit, 1<<30)
	}
	// A custom hardening is applied too.
	sb := r.provision(t, "hardened", func(s *sandbox.Spec) { s.Hardening = customHardening() })
	out = sh(t, sb, "id -u; cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; echo ok > /workspace/f; stat -c %u /workspace/f")
	pids = "100\n"
	if r.h.Kernel.PidsLimitHidden {
		pids = ""
	}
	for _, want := range []string{"4242\n", pids, strconv.Itoa(128<<20) + "\n", "4242\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("custom hardening:\n%s\nwant %q", out, want)
		}
	}
	// Files written through the API belong to the sandbox user too.
	if err := sb.WriteFile(ctx, "/workspace/api", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, sb, "stat -c %u /workspace/api"); got != "4242\n" {
		t.Errorf("WriteFile owner = %q; want 4242", got)
	}
}

func testEnvironment(t *testing.T, r *run) {
	out := sh(t, r.main, "env")
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	if env["GREETING"] != "hello world" || env["EMPTY"] != "" {
		t.Errorf("env = %q; want GREETING and EMPTY from the spec", env)
	}
	// What the backend sets so that no engine chooses it (Podman would
	// add container=podman and TERM=xterm, Docker neither).
	for k, v := range defaults.Env() {
		if env[k] != v {
			t.Errorf("env %s=%q; want %q, whatever the engine", k, env[k], v)
		}
	}
	// What a backend and a shell may add; nothing else.
	allowed := map[string]bool{"GREETING": true, "EMPTY": true, "PATH": true, "HOME": true, "HOSTNAME": true, "PWD": true, "SHLVL": true, "OLDPWD": true}
	for k := range defaults.Env() {
		allowed[k] = true
	}
	for k := range env {
		if !allowed[k] {
			t.Errorf("env holds %s=%q; want only Spec.Env and what the backend must set", k, env[k])
		}
	}
	if strings.Contains(out, "leaked") {
		t.Errorf("the host's environment leaked in:\n%s", out)
	}
}

func testNetNone(t *testing.T, r *run) {
	out := sh(t, r.main, "cat /proc/net/dev")
	for _, l := range strings.Split(out, "\n")[2:] {
		name, _, _ := strings.Cut(strings.TrimSpace(l), ":")
		if name != "" && name != "lo" {
			t.Errorf("NetNone sandbox has interface %q:\n%s", name, out)
		}
	}
}

func testNetUnrestricted(t *testing.T, r *run) {
	if r.h.NetUnrestrictedRefused {
		ctx, cancel := r.ctx()
		defer cancel()
		spec := sandbox.Spec{SessionID: r.id("net"), Image: r.h.Image, Networking: domain.Networking{Type: domain.NetUnrestricted}}
		if _, err := r.h.Provider.Provision(ctx, spec); !errors.Is(err, sandbox.ErrNetworkingUnsupported) {
			t.Errorf("Provision(NetUnrestricted) = %v; want ErrNetworkingUnsupported (the harness says this engine cannot isolate it)", err)
		}
		if slices.Contains(owned(t, r.h.Provider), spec.SessionID) {
			t.Errorf("a refused Provision left session %s", spec.SessionID)
		}
		return
	}
	sb := r.provision(t, "net", func(s *sandbox.Spec) { s.Networking = domain.Networking{Type: domain.NetUnrestricted} })
	out := sh(t, sb, "cat /proc/net/dev")
	if !strings.Contains(out, "eth0:") {
		t.Errorf("NetUnrestricted sandbox has no eth0:\n%s", out)
	}
}

func testExecBasics(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	for _, tc := range []struct {
		cmd          string
		code         int
		stdout, serr string
	}{
		{"true", 0, "", ""},
		{"exit 7", 7, "", ""},
		{"echo out; echo err >&2", 0, "out\n", "err\n"},
		{"pwd", 0, "/workspace\n", ""},
		{`printf '%s|' "$0"`, 0, "/bin/sh|", ""},

		{"cat", 0, "", ""}, // stdin is empty, not the caller's
	} {
		res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: tc.cmd, Timeout: time.Minute})
		if err != nil || res.ExitCode != tc.code || res.Stdout != tc.stdout || res.Stderr != tc.serr || res.TimedOut || res.Truncated {
			t.Errorf("Exec(%q) = %+v, %v; want exit %d, stdout %q, stderr %q", tc.cmd, res, err, tc.code, tc.stdout, tc.serr)
		}
	}
	if res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: "kill -TERM $$", Timeout: time.Minute}); err != nil || res.ExitCode != 143 {
		t.Errorf("Exec(kill -TERM $$) = %+v, %v; want exit 143", res, err)
	}
}

func testExecConcurrent(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: fmt.Sprintf("sleep 0.2; echo %d", i), Timeout: time.Minute})
			if err != nil || res.Stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("concurrent Exec %d = %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
}

// escaper starts children that leave the command's process group and
// session, double-fork to PID 1, and clear their environment.
const escaper = `sleep 1001 &
setsid sh -c 'sleep 1002 & sleep 1003' &
(sleep 1004 &)
(setsid env -i sh -c 'sleep 1005 & exec sleep 1006' &) 
nohup sleep 1007 >/dev/null 2>&1 &
sleep 1008`

// leftover lists the suite's sleepers still running.
func leftover(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	out := sh(t, sb, "ps -o args 2>/dev/null || ps")
	var hits []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "sleep 10") {
			hits = append(hits, strings.TrimSpace(l))
		}
	}
	return strings.Join(hits, "; ")
}

func testTimeoutTree(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	start := time.Now()
	res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: escaper, Timeout: 2 * time.Second})
	if err != nil || !res.TimedOut {
		t.Fatalf("Exec(escaper, 2s) = %+v, %v; want TimedOut", res, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the timeout took %v to return", d)
	}
	if left := leftover(t, r.main); left != "" {
		t.Errorf("after the timeout these still run: %s", left)
	}
	if got := sh(t, r.main, "echo usable"); got != "usable\n" {
		t.Errorf("after the timeout: %q", got)
	}
}

func testCancel(t *testing.T, r *run) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	start := time.Now()
	_, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: "setsid sleep 1011 & sleep 1012"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Exec with a cancelled ctx = %v; want context.Canceled", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	if left := leftover(t, r.main); left != "" {
		t.Errorf("after cancellation these still run: %s", left)
	}
}

func testFlood(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	flood := r.h.Kernel.FloodBytes
	if flood == 0 {
		flood = 1 << 30
	}
	res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: fmt.Sprintf("dd if=/dev/zero bs=1048576 count=%d 2>/dev/null; echo tail >&2", flood>>20), Timeout: 150 * time.Second})
	runtime.ReadMemStats(&after)
	if err != nil || res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("Exec(%d MiB flood) = exit %d, timed out %v, %v", flood>>20, res.ExitCode, res.TimedOut, err)
	}
	if !res.Truncated || len(res.Stdout) != sandbox.MaxOutputBytes || res.Stderr != "tail\n" {
		t.Errorf("flood: Truncated %v, %d bytes of stdout, stderr %q; want true, %d, \"tail\\n\"", res.Truncated, len(res.Stdout), res.Stderr, sandbox.MaxOutputBytes)
	}
	// Streaming 1 GiB must not mean holding it: a cap on what the copy
	// allocated in all, far below the flood.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 128<<20 {
		t.Errorf("the flood made the test process allocate %d MiB; want it bounded (< 128 MiB)", alloc>>20)
	}
}

func testForkBomb(t *testing.T, r *run) {
	bomb := r.provision(t, "bomb", func(s *sandbox.Spec) { s.Hardening = bombHardening })
	ctx, cancel := r.ctx()
	defer cancel()
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, err := bomb.Exec(ctx, sandbox.ExecRequest{Command: "b() { b | b & }; b; sleep 1020", Timeout: 5 * time.Second})
		if err != nil {
			t.Errorf("Exec(fork bomb) = %v", err)
		}
		done <- res
	}()
	time.Sleep(2 * time.Second)
	// Meanwhile another sandbox works.
	if got := sh(t, r.main, "echo unaffected"); got != "unaffected\n" {
		t.Errorf("another sandbox during the bomb: %q", got)
	}
	res := <-done
	if !res.TimedOut {
		t.Errorf("fork bomb result = %+v; want TimedOut", res)
	}
	// The bomb is gone and the sandbox usable. Killed processes may stay
	// zombies for a moment until PID 1 reaps them: poll briefly.
	var n int
	for i := 0; i < 50; i++ {
		out := sh(t, bomb, "ps -o pid | wc -l")
		if n, _ = strconv.Atoi(strings.TrimSpace(out)); n <= 10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n > 10 {
		t.Errorf("after the bomb %d processes remain", n)
	}
}

func testOOM(t *testing.T, r *run) {
	sb := r.provision(t, "oom", func(s *sandbox.Spec) { s.Hardening = oomHardening })
	ctx, cancel := r.ctx()
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "dd if=/dev/zero of=/dev/null bs=256M count=1", Timeout: time.Minute})
	switch {
	case r.h.Kernel.OOMEndsSandbox:
		if err == nil && res.ExitCode == 0 {
			t.Errorf("Exec(balloon) = %+v; want it ended (137, or an error)", res)
		}
		t.Logf("Exec(balloon) under a kernel that ends the sandbox = %+v, %v", res, err)
		// The sandbox comes back: Provision starts it again.
		if _, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: r.id("oom"), Image: r.h.Image, Hardening: oomHardening}); err != nil {
			t.Fatalf("Provision after the balloon = %v", err)
		}
	case err != nil || res.ExitCode != 137 || !strings.HasSuffix(res.Stderr, "stockade: killed: out of memory\n"):
		t.Errorf("Exec(balloon) = %+v, %v; want exit 137 and the out-of-memory line", res, err)
	}
	if got := sh(t, sb, "echo alive"); got != "alive\n" {
		t.Errorf("after the OOM: %q", got)
	}
	// An ordinary kill -9 is not reported as OOM.
	res, _ = sb.Exec(ctx, sandbox.ExecRequest{Command: "kill -KILL $$", Timeout: time.Minute})
	if res.ExitCode != 137 || strings.Contains(res.Stderr, "out of memory") {
		t.Errorf("Exec(kill -9) = %+v; want 137 without the OOM line", res)
	}
}

func testFileRoundTrip(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if err := sb.WriteFile(ctx, "/workspace/rt/deep/er/file.bin", data); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "/workspace/rt/deep/er/file.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile = %d bytes, %v; want the 1 MiB written", len(got), err)
	}
	if out := sh(t, sb, "stat -c '%a %u' /workspace/rt/deep/er/file.bin /workspace/rt/deep"); out != "644 65534\n755 65534\n" {
		t.Errorf("new file and parent: %q; want 644 and 755, owned by the sandbox user", out)
	}
	sh(t, sb, "chmod 750 /workspace/rt/deep/er/file.bin")
	if err := sb.WriteFile(ctx, "/workspace/rt/deep/er/file.bin", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, sb, "stat -c %a /workspace/rt/deep/er/file.bin; cat /workspace/rt/deep/er/file.bin"); out != "750\nv2" {
		t.Errorf("replaced file: %q; want mode 750 kept and content v2", out)
	}
	// /tmp is writable too; empty files work.
	if err := sb.WriteFile(ctx, "/tmp/empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "/tmp/empty"); err != nil || len(got) != 0 {
		t.Errorf("ReadFile(empty) = %q, %v", got, err)
	}
	// Symlinks are followed inside the sandbox.
	sh(t, sb, "ln -sf deep/er/file.bin /workspace/rt/link")
	if got, err := sb.ReadFile(ctx, "/workspace/rt/link"); err != nil || string(got) != "v2" {
		t.Errorf("ReadFile(symlink) = %q, %v; want v2", got, err)
	}
	rc, size, err := sb.ReadFileStream(ctx, "/workspace/rt/deep/er/file.bin", 0)
	if err != nil || size != 2 {
		t.Fatalf("ReadFileStream = %d, %v; want size 2", size, err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "v2" {
		t.Errorf("ReadFileStream read %q", b)
	}
	if _, _, err := sb.ReadFileStream(ctx, "/workspace/rt/deep/er/file.bin", 1); !errors.Is(err, sandbox.ErrFileTooLarge) {
		t.Errorf("ReadFileStream with maxBytes 1 = %v; want ErrFileTooLarge", err)
	}
	noTemps(t, sb)
}

// noTemps fails t if any temporary is left in the writable places.
func noTemps(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	if out := sh(t, sb, "find /workspace /tmp -name '"+sandbox.TempPrefix+"*'"); out != "" {
		t.Errorf("temporaries left behind:\n%s", out)
	}
}

func testReadErrors(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sh(t, r.main, "mkdir -p /workspace/re && mkfifo /workspace/re/fifo && truncate -s "+strconv.Itoa(sandbox.MaxFileBytes+1)+" /workspace/re/big && ln -sf /nonexistent /workspace/re/dangling")
	for _, tc := range []struct {
		path string
		want error
	}{
		{"/workspace/re/missing", sandbox.ErrFileNotExist},
		{"/workspace/re/missing/deeper", sandbox.ErrFileNotExist},
		{"/workspace/re/dangling", sandbox.ErrFileNotExist},
		{"/workspace/re", sandbox.ErrIsDirectory},
		{"/workspace", sandbox.ErrIsDirectory},
		{"/workspace/re/fifo", sandbox.ErrNotRegularFile},
		{"/workspace/re/big", sandbox.ErrFileTooLarge},
	} {
		if _, err := r.main.ReadFile(ctx, tc.path); !errors.Is(err, tc.want) {
			t.Errorf("ReadFile(%s) = %v; want %v", tc.path, err, tc.want)
		}
	}
	for _, p := range []string{"", "relative", "/workspace/../etc/passwd", "/workspace/", "/a\x00b"} {
		if _, err := r.main.ReadFile(ctx, p); err == nil {
			t.Errorf("ReadFile(%q) succeeded; want a refusal", p)
		}
	}
}

func testWriteErrors(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	sh(t, sb, "mkdir -p /workspace/we/dir /workspace/we/ro && echo f > /workspace/we/file && chmod 555 /workspace/we/ro")
	for _, tc := range []struct {
		path string
		want error
	}{
		{"/workspace/we/dir", sandbox.ErrIsDirectory},
		{"/workspace", sandbox.ErrIsDirectory},
		{"/workspace/we/file/x", sandbox.ErrNotDirectory},
		{"/workspace/we/file/x/y", sandbox.ErrNotDirectory},
		{"/etc/passwd", sandbox.ErrNotWritable},
		{"/stockade-new", sandbox.ErrNotWritable},
		{"/usr/bin/x/y", sandbox.ErrNotWritable},
		{"/workspace/we/ro/x", sandbox.ErrNotWritable},
	} {
		err := sb.WriteFile(ctx, tc.path, []byte("x"))
		if !errors.Is(err, tc.want) {
			t.Errorf("WriteFile(%s) = %v; want %v", tc.path, err, tc.want)
		}
		var pe *sandbox.PathNotWritableError
		if tc.want == sandbox.ErrNotWritable && !errors.As(err, &pe) {
			t.Errorf("WriteFile(%s) = %v; want a *PathNotWritableError", tc.path, err)
		}
	}
	// Symlinks do not carry a write out of the writable places, and carry it
	// within them.
	sh(t, sb, "ln -sf /etc /workspace/we/etc && mkdir -p /tmp/we && ln -sf /tmp/we /workspace/we/tmp")
	if err := sb.WriteFile(ctx, "/workspace/we/etc/evil", []byte("x")); !errors.Is(err, sandbox.ErrNotWritable) {
		t.Errorf("WriteFile through a symlink to /etc = %v; want ErrNotWritable", err)
	}
	if err := sb.WriteFile(ctx, "/workspace/we/tmp/ok", []byte("ok")); err != nil {
		t.Errorf("WriteFile through a symlink to /tmp = %v", err)
	} else if got := sh(t, sb, "cat /tmp/we/ok"); got != "ok" {
		t.Errorf("WriteFile through a symlink to /tmp landed %q", got)
	}
	if got := sh(t, sb, "cat /workspace/we/file"); got != "f\n" {
		t.Errorf("a failed write changed the file: %q", got)
	}
	for _, p := range []string{"", "rel/x", "/workspace/../etc/x", "/workspace/x/", "/workspace/a\nb"} {
		if err := sb.WriteFile(ctx, p, nil); err == nil {
			t.Errorf("WriteFile(%q) succeeded; want a refusal", p)
		}
	}
	noTemps(t, sb)
}

// failReader fails the test if read.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Errorf("the source was read")
	return 0, io.EOF
}

func testWriteStream(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	if err := sb.WriteFileStream(ctx, "/workspace/ws", failReader{t}, -1); !errors.Is(err, sandbox.ErrSizeNotALength) {
		t.Errorf("WriteFileStream(size -1) = %v; want ErrSizeNotALength", err)
	}
	if err := sb.WriteFileStream(ctx, "/workspace/ws", failReader{t}, sandbox.MaxFileBytes+1); !errors.Is(err, sandbox.ErrFileTooLarge) {
		t.Errorf("WriteFileStream(too large) = %v; want ErrFileTooLarge", err)
	}
	if err := sb.WriteFileStream(ctx, "/workspace/ws", strings.NewReader("exact"), 5); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		size int64
	}{{"shrt", 5}, {"toolong", 5}} {
		if err := sb.WriteFileStream(ctx, "/workspace/ws", strings.NewReader(tc.src), tc.size); err == nil {
			t.Errorf("WriteFileStream(%q, size %d) succeeded", tc.src, tc.size)
		}
		if err := sb.WriteFileStream(ctx, "/workspace/ws-new", strings.NewReader(tc.src), tc.size); err == nil {
			t.Errorf("WriteFileStream(%q, size %d) to a new file succeeded", tc.src, tc.size)
		}
	}
	if got := sh(t, sb, "cat /workspace/ws; test ! -e /workspace/ws-new && echo absent"); got != "exactabsent\n" {
		t.Errorf("after bad sizes: %q; want the old content and no new file", got)
	}
	noTemps(t, sb)
}

func testWriteFiles(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	var files []sandbox.FileWrite
	for i := 0; i < 300; i++ {
		files = append(files, sandbox.FileWrite{Path: fmt.Sprintf("/workspace/wf/d%d/f %d.txt", i%7, i), Data: []byte(strconv.Itoa(i))})
	}
	files = append(files, sandbox.FileWrite{Path: "/tmp/wf/x", Data: []byte("tmp")})
	if err := sb.WriteFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	out := sh(t, sb, "find /workspace/wf -type f | wc -l; cat '/workspace/wf/d3/f 157.txt' /tmp/wf/x")
	if out != "300\n157tmp" {
		t.Errorf("after WriteFiles: %q", out)
	}
	if err := sb.WriteFiles(ctx, nil); err != nil {
		t.Errorf("WriteFiles(nil) = %v", err)
	}
	noTemps(t, sb)
}

func testWriteFilesFailure(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	sh(t, sb, "mkdir -p /workspace/wff/dir")
	files := []sandbox.FileWrite{
		{Path: "/workspace/wff/a", Data: []byte("a")},
		{Path: "/workspace/wff/b", Data: []byte("b")},
		{Path: "/workspace/wff/dir", Data: []byte("x")},
		{Path: "/workspace/wff/c", Data: []byte("c")},
	}
	if err := sb.WriteFiles(ctx, files); !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("WriteFiles with a directory target = %v; want ErrIsDirectory", err)
	}
	if out := sh(t, sb, "cat /workspace/wff/a /workspace/wff/b; test ! -e /workspace/wff/c && echo no-c"); out != "abno-c\n" {
		t.Errorf("after the failure: %q; want a and b landed, c not", out)
	}
	files = []sandbox.FileWrite{{Path: "/workspace/wff/d", Data: []byte("d")}, {Path: "/etc/x", Data: []byte("x")}, {Path: "/workspace/wff/e", Data: []byte("e")}}
	if err := sb.WriteFiles(ctx, files); !errors.Is(err, sandbox.ErrNotWritable) {
		t.Errorf("WriteFiles with /etc/x = %v; want ErrNotWritable", err)
	}
	if out := sh(t, sb, "cat /workspace/wff/d; test ! -e /workspace/wff/e && echo no-e"); out != "dno-e\n" {
		t.Errorf("after the failure: %q; want d landed, e not", out)
	}
	noTemps(t, sb)
}

func testRoundTrips(t *testing.T, r *run) {
	if r.h.RoundTrips == nil {
		t.Skip("harness has no RoundTrips")
	}
	ctx, cancel := r.ctx()
	defer cancel()
	count := func(n int) int64 {
		var files []sandbox.FileWrite
		for i := 0; i < n; i++ {
			files = append(files, sandbox.FileWrite{Path: fmt.Sprintf("/workspace/rtt%d/d%d/f%d", n, i%10, i), Data: []byte("x")})
		}
		before := r.h.RoundTrips()
		if err := r.main.WriteFiles(ctx, files); err != nil {
			t.Fatal(err)
		}
		return r.h.RoundTrips() - before
	}
	small, large := count(2), count(1000)
	if small != large {
		t.Errorf("WriteFiles made %d engine calls for 2 files and %d for 1000; want the same", small, large)
	}
	t.Logf("WriteFiles: %d engine calls", large)
}

func readTar(t *testing.T, rc io.ReadCloser) map[string]string {
	t.Helper()
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading the export: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		case tar.TypeDir:
			out[h.Name] = "dir"
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

func testExport(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sh(t, r.main, "mkdir -p /workspace/ex/sub && echo one > /workspace/ex/sub/one && ln -s /etc/passwd /workspace/ex/pw && ln -s .. /workspace/ex/up")
	rc, err := r.h.Provider.Export(ctx, r.spec.SessionID, "/workspace/ex")
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, rc)
	for name, want := range map[string]string{"ex/sub/one": "one\n", "ex/pw": "-> /etc/passwd", "ex/up": "-> .."} {
		if files[strings.TrimSuffix(name, "/")] != want {
			t.Errorf("export[%s] = %q; want %q (all: %q)", name, files[name], want, keys(files))
		}
	}
	for name := range files {
		if name != "ex" && name != "ex/" && !strings.HasPrefix(name, "ex/") {
			t.Errorf("export member %q is outside the top-level directory ex", name)
		}
		if strings.Contains(files[name], "root:") {
			t.Errorf("export member %q holds /etc/passwd: a symlink was followed", name)
		}
	}
	// A root that is itself a symlink is archived as the link.
	sh(t, r.main, "ln -s /etc /workspace/exlink")
	rc, err = r.h.Provider.Export(ctx, r.spec.SessionID, "/workspace/exlink")
	if err != nil {
		t.Fatal(err)
	}
	if files := readTar(t, rc); len(files) != 1 || files["exlink"] != "-> /etc" {
		t.Errorf("Export(symlink root) = %q; want only the link exlink -> /etc", keys(files))
	}
	if _, err := r.h.Provider.Export(ctx, r.spec.SessionID, "/workspace/nope"); !errors.Is(err, sandbox.ErrFileNotExist) {
		t.Errorf("Export(missing root) = %v; want ErrFileNotExist", err)
	}
	if _, err := r.h.Provider.Export(ctx, r.id("nobody"), "/workspace"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Export(missing session) = %v; want ErrNotFound", err)
	}
}

func testAttach(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb, err := r.h.Provider.Attach(ctx, r.spec.SessionID)
	if err != nil || sb.ID() != r.main.ID() {
		t.Fatalf("Attach(main) = %v, %v", sb, err)
	}
	if got := sh(t, sb, "echo $GREETING; pwd"); got != "hello world\n/workspace\n" {
		t.Errorf("attached Exec: %q", got)
	}
	id := r.id("never")
	if _, err := r.h.Provider.Attach(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach(unknown) = %v; want ErrNotFound", err)
	}
	if slices.Contains(owned(t, r.h.Provider), id) {
		t.Errorf("Attach created a sandbox")
	}
}

// revoker records revocations and whether the sandbox still existed then.
type revoker struct {
	p       sandbox.Provider
	mu      sync.Mutex
	revoked []domain.ID
	existed []bool
}

func (v *revoker) Revoke(ctx context.Context, id domain.ID) error {
	ids, err := v.p.Owned(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.revoked = append(v.revoked, id)
	v.existed = append(v.existed, err == nil && slices.Contains(ids, id))
	return nil
}

func testOwnedReap(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	rv := &revoker{p: r.h.Provider}
	id := r.id("reaped")
	sb, err := r.h.Provider.Provision(ctx, sandbox.Spec{SessionID: id, Image: r.h.Image, GateTokenRevoker: rv})
	if err != nil {
		t.Fatal(err)
	}
	ids := owned(t, r.h.Provider)
	if !slices.Contains(ids, id) || !slices.IsSorted(ids) {
		t.Errorf("Owned() = %q; want it sorted and holding %s", ids, id)
	}
	if err := r.h.Provider.Reap(ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(rv.revoked) != 1 || rv.revoked[0] != id || !rv.existed[0] {
		t.Errorf("revocations %q (sandbox existed: %v); want one, before removal", rv.revoked, rv.existed)
	}
	if slices.Contains(owned(t, r.h.Provider), id) {
		t.Errorf("Owned() still lists %s after Reap", id)
	}
	if _, err := r.h.Provider.Attach(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach after Reap = %v; want ErrNotFound", err)
	}
	if err := r.h.Provider.Reap(ctx, id); err != nil {
		t.Errorf("second Reap = %v; want nil", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("Destroy after Reap = %v; want nil", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec after Reap = %v; want ErrNotFound", err)
	}
	// Destroy twice.
	sb2 := r.provision(t, "destroyed", nil)
	for i := 0; i < 2; i++ {
		if err := sb2.Destroy(ctx); err != nil {
			t.Errorf("Destroy #%d = %v", i+1, err)
		}
	}
	if slices.Contains(owned(t, r.h.Provider), r.id("destroyed")) {
		t.Errorf("Owned() lists a destroyed sandbox")
	}
}

func testAtomic(t *testing.T, r *run) {
	ctx, cancel := r.ctx()
	defer cancel()
	sb := r.main
	a, b := bytes.Repeat([]byte("a"), 256<<10), bytes.Repeat([]byte("b"), 256<<10)
	sum := func(data []byte) string {
		if err := sb.WriteFile(ctx, "/workspace/at/f", data); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(sh(t, sb, "md5sum < /workspace/at/f"))
	}
	sa, sbb := sum(a), sum(b)
	// A reader that checks every version it sees is one of the two whole
	// files, until told to stop.
	reader := fmt.Sprintf(`n=0; while [ ! -e /tmp/at-stop ]; do
	s=$(md5sum < /workspace/at/f) || exit 2
	[ "$s" = %q ] || [ "$s" = %q ] || { echo "torn: $s"; exit 1; }
	n=$((n+1))
done; echo "$n"`, sa, sbb)
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: reader, Timeout: 2 * time.Minute})
		if err != nil {
			t.Errorf("reader: %v", err)
		}
		done <- res
	}()
	for i := 0; i < 6; i++ {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := sb.WriteFile(ctx, "/workspace/at/f", data); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.WriteFile(ctx, "/tmp/at-stop", nil); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.ExitCode != 0 {
		t.Errorf("a reader saw a partial file: %+v", res)
	}
	t.Logf("the reader checked %s versions", strings.TrimSpace(res.Stdout))
	noTemps(t, sb)
}
