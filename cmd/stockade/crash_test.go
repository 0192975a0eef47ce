package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Bounds of the crash test's waits.
const (
	// crashPhaseWait bounds the wait for the phase a run is to be killed
	// in. The run that reaches "probe" builds the build-cache seed first
	// (minutes on a loaded machine; inspect's own seed budget is 20m).
	crashPhaseWait = 20 * time.Minute
	// crashContainerWait bounds the wait, once the phase started, for its
	// first container to exist, so the kill leaves one running.
	crashContainerWait = 30 * time.Second
	// crashExitWait bounds the wait for a killed process, and its
	// stderr, to end.
	crashExitWait = 30 * time.Second
	// crashCommandWait bounds a stockade command that runs to completion
	// (reap; the run after the last kill).
	crashCommandWait = 10 * time.Minute
)

// crashPhases are inspect's phases the test kills it in, in the order
// inspect reaches them. One data directory serves them all, so the
// build-cache seed is built once: "seed" kills its first build (which the
// next run resumes), and the run killed in "probe" finishes it.
var crashPhases = []string{"image", "lock", "snapshot", "seed", "probe", "acquire", "validate", "candidates"}

// containerPhases are the phases that run containers: the kill waits for
// the first one to exist.
var containerPhases = []string{"seed", "probe", "acquire", "validate", "candidates"}

// TestCrash_Inspect kills `stockade inspect` with SIGKILL as each phase
// starts (once the phase's first container runs, for the phases that run
// one) and checks what the crash left: the repository inspected is
// unchanged, byte for byte, .git included; and after `stockade reap`, or
// after the next run (the one after the last kill runs to completion, with
// no reap before it), no container, volume or network carries the data
// directory's label and no run-* directory is left in it.
//
// inspect reports each phase as it starts with -v, as a debug log line
// "msg=phase phase=NAME" on stderr; that is the signal the test kills on.
func TestCrash_Inspect(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stockade and the build-cache seed, and runs inspect nine times")
	}
	eng := enginetest.Client(t)
	start := time.Now()
	bin := buildStockade(t)

	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	makeCrashRepo(t, filepath.Join("..", "..", "testdata", "repos", "clean"), repo)
	want := repoState(t, repo)

	// The data directory does not exist yet: inspect creates and marks it.
	dataDir := filepath.Join(root, "data")
	dataDirID := label.DataDirID(dataDir)
	t.Cleanup(func() { removeCrashLeftovers(t, eng, dataDir, dataDirID) })
	// The runs' TMPDIR, so what a killed run leaves in it (the proxy
	// -fixture-proxy generates) stays inside the test's directory.
	tmp := filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	proxy, err := filepath.Abs(filepath.Join("..", "..", "testdata", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TMPDIR="+tmp)
	inspectArgs := []string{"inspect", "-json", "-data-dir", dataDir, "-fixture-proxy", proxy, repo}

	for _, phase := range crashPhases {
		ok := t.Run(phase, func(t *testing.T) {
			if phase == "image" {
				logImagePhase(t, eng)
			}
			k := killInPhase(t, eng, bin, env, append([]string{inspectArgs[0], "-v"}, inspectArgs[1:]...), phase, dataDirID)
			t.Logf("killed in phase %q after %v; phases started: %v; its containers alive at the kill: %v",
				k.phase, k.dur.Round(time.Millisecond), k.phases, k.containers)
			checkRepo(t, repo, want)
			if phase == crashPhases[len(crashPhases)-1] {
				return // the next run cleans up after this one
			}
			ctx, cancel := context.WithTimeout(context.Background(), crashCommandWait)
			defer cancel()
			out, err := stockadeCmd(ctx, bin, env, "reap", "-data-dir", dataDir, "-lock-timeout", "30s").CombinedOutput()
			if err != nil {
				t.Fatalf("stockade reap -data-dir %s: %v\n%s", dataDir, err, out)
			}
			t.Logf("stockade reap: %s", bytes.TrimSpace(out))
			checkDataDirClean(t, eng, dataDir, dataDirID)
		})
		if !ok {
			t.Fatalf("stopping at phase %q: the later phases share its data directory", phase)
		}
	}

	t.Run("next run", func(t *testing.T) {
		var runs []string
		if ents, err := os.ReadDir(dataDir); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "run-") {
					runs = append(runs, e.Name())
				}
			}
		}
		t.Logf("the last kill left containers %v and run directories %v for the next run to remove", dataDirContainers(t, eng, dataDirID), runs)
		ctx, cancel := context.WithTimeout(context.Background(), crashCommandWait)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := stockadeCmd(ctx, bin, env, inspectArgs...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var rep report.Report
		if jerr := json.Unmarshal(stdout.Bytes(), &rep); err != nil || jerr != nil {
			t.Fatalf("the run after the crashes: %v, report %v\nstdout: %s\nstderr: %s", err, jerr, stdout.String(), stderr.String())
		}
		if rep.Verdict != report.Clean {
			t.Errorf("the run after the crashes: verdict %q; want %q (the data directory stays usable)", rep.Verdict, report.Clean)
		}
		checkRepo(t, repo, want)
		checkDataDirClean(t, eng, dataDir, dataDirID)
		if ents, err := os.ReadDir(tmp); err == nil && len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			// Not the data directory's: the killed runs' generated fixture
			// proxies, which only -fixture-proxy makes.
			t.Logf("left in TMPDIR by the killed runs: %v", names)
		}
	})
	t.Logf("crash test took %v", time.Since(start).Round(time.Second))
}

// buildStockade builds the stockade command into a temporary directory.
func buildStockade(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build stockade with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "stockade")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stockadeCmd is bin with args and env, killed when ctx ends.
func stockadeCmd(ctx context.Context, bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.WaitDelay = crashExitWait
	return cmd
}

// logImagePhase says what the image phase has to do on this engine: with
// a toolchain image present it only selects it, and is over in
// milliseconds, so the kill lands as it ends; without one it builds one
// from the host's Go, and the kill lands mid-build.
func logImagePhase(t *testing.T, eng *dockerapi.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos, err := image.List(ctx, eng)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, in := range infos {
		if in.GoVersion != "" {
			have = append(have, in.GoVersion+" "+in.ID[:min(len(in.ID), 19)])
		}
	}
	if len(have) > 0 {
		t.Logf("the engine has toolchain images %v: the image phase only selects one (it builds nothing), so this kill tests a run killed as it selects its image or just after", have)
	} else {
		t.Logf("the engine has no toolchain image Stockade built: the image phase builds one, and is killed while it does")
	}
}

// killed is what killInPhase did.
type killed struct {
	phase      string        // the phase current at the kill
	phases     []string      // every phase the run started
	containers []string      // the data directory's containers at the kill (name profile)
	dur        time.Duration // from the start of the run to the kill
}

// killInPhase runs bin with args (inspect -v) and SIGKILLs it as soon as
// it starts phase, or, for a phase that runs containers, as soon as the
// first container of the data directory exists in it. It fails t if the
// run ends before that.
func killInPhase(t *testing.T, eng *dockerapi.Client, bin string, env, args []string, phase, dataDirID string) killed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseWait)
	defer cancel()
	cmd := stockadeCmd(ctx, bin, env, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Every phase line goes to phases, which holds more than inspect has
	// phases, so the reader never blocks; it is closed at EOF.
	phases := make(chan string, 32)
	var mu sync.Mutex
	var stderr bytes.Buffer
	go func() {
		defer close(phases)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			stderr.WriteString(line + "\n")
			mu.Unlock()
			if p, ok := phaseOf(line); ok {
				phases <- p
			}
		}
	}()
	var k killed
	fail := func(format string, args ...any) {
		t.Helper()
		cmd.Process.Kill()
		for range phases {
		}
		err := cmd.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s (phases %v; exit: %v)\nstdout: %s\nstderr: %s", fmt.Sprintf(format, args...), k.phases, err, stdout.String(), stderr.String())
	}

	for k.phase != phase {
		select {
		case p, ok := <-phases:
			if !ok {
				fail("inspect ended before phase %q", phase)
			}
			k.phases = append(k.phases, p)
			k.phase = p
		case <-ctx.Done():
			fail("phase %q did not start within %v", phase, crashPhaseWait)
		}
	}
	if slices.Contains(containerPhases, phase) {
		// Wait for the phase's first container. A phase may run none (a
		// seed already built): then the kill lands as the next starts.
		tick := time.NewTicker(10 * time.Millisecond)
		bound := time.NewTimer(crashContainerWait)
	wait:
		for {
			select {
			case p, ok := <-phases:
				if !ok {
					fail("inspect ended before the kill")
				}
				k.phases = append(k.phases, p)
				k.phase = p
				break wait
			case <-bound.C:
				t.Logf("no container of phase %q within %v; killing anyway", phase, crashContainerWait)
				break wait
			case <-tick.C:
				if k.containers = dataDirContainers(t, eng, dataDirID); len(k.containers) > 0 {
					break wait
				}
			}
		}
		tick.Stop()
		bound.Stop()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		fail("kill: %v", err)
	}
	k.dur = time.Since(start)
	if len(k.containers) == 0 {
		k.containers = dataDirContainers(t, eng, dataDirID)
	}
	// The phases logged before the kill; the reader ends at EOF.
	drain := time.NewTimer(crashExitWait)
	defer drain.Stop()
drained:
	for {
		select {
		case p, ok := <-phases:
			if !ok {
				break drained
			}
			k.phases = append(k.phases, p)
			k.phase = p
		case <-drain.C:
			t.Fatalf("stderr of the killed inspect still open after %v", crashExitWait)
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("inspect ended with %v, not by the SIGKILL\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return k
}

// phaseOf returns the phase a debug log line of inspect -v announces:
// `time=… level=DEBUG msg=phase phase=NAME`.
func phaseOf(line string) (string, bool) {
	f := strings.Fields(line)
	if !slices.Contains(f, "msg=phase") {
		return "", false
	}
	for _, kv := range f {
		if p, ok := strings.CutPrefix(kv, "phase="); ok {
			return p, true
		}
	}
	return "", false
}

// dataDirContainers lists the containers labelled with the data directory,
// as "name profile".
func dataDirContainers(t *testing.T, eng *dockerapi.Client, dataDirID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelFilter(label.DataDir + "=" + dataDirID)})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, strings.Join(c.Names, ",")+" "+c.Labels[label.Profile])
	}
	return out
}

// checkDataDirClean fails t if anything in the engine carries the data
// directory's label, or if a run directory is left in it.
func checkDataDirClean(t *testing.T, eng *dockerapi.Client, dataDir, dataDirID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := enginetest.Leftovers(ctx, eng, map[string]string{label.DataDir: dataDirID})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left in the engine with the data directory's label: %q", left)
	}
	ents, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if strings.HasPrefix(e.Name(), "run-") {
			t.Errorf("run directory %s left in the data directory", e.Name())
		}
	}
	if !slices.Contains(names, toolchain.MarkerFile) {
		t.Errorf("the data directory holds %v and no %s: stockade did not make it", names, toolchain.MarkerFile)
	}
}

// removeCrashLeftovers removes, at the end of the test, what carries its
// data directory's label (nothing, when it passed), and the data directory,
// whose seed is read-only.
func removeCrashLeftovers(t *testing.T, eng *dockerapi.Client, dataDir, dataDirID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelFilter(label.DataDir + "=" + dataDirID)})
	if err != nil {
		t.Logf("listing containers to remove: %v", err)
	}
	for _, c := range cs {
		if c.Labels[label.DataDir] == dataDirID {
			eng.ContainerRemove(ctx, c.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
		}
	}
	filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dataDir); err != nil {
		t.Logf("removing the data directory: %v", err)
	}
}

// gitEnv is the environment of the test's git commands: no user or system
// configuration, an identity for the commit, no optional index refresh.
var gitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_OPTIONAL_LOCKS=0",
	"GIT_AUTHOR_NAME=crash", "GIT_AUTHOR_EMAIL=crash@example.com", "GIT_COMMITTER_NAME=crash", "GIT_COMMITTER_EMAIL=crash@example.com"}

func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), gitEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// makeCrashRepo copies the fixture src to dst and commits it as a git
// repository, with an executable file and a symlink added, then leaves an
// untracked file beside them: inspect must change none of it.
func makeCrashRepo(t *testing.T, src, dst string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v", err)
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "tool.sh"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("go.mod", filepath.Join(dst, "go.mod.link")); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, dst, "init", "-q", "-b", "main")
	gitCmd(t, dst, "add", ".")
	gitCmd(t, dst, "commit", "-q", "-m", "fixture")
	if err := os.WriteFile(filepath.Join(dst, "scratch.txt"), []byte("not committed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// repoState describes dir so that any change shows: every entry's path,
// type, mode and content hash (symlinks: target), .git included, then
// git's refs and the list of its objects.
func repoState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += fmt.Sprintf(" %d %s", len(b), hex.EncodeToString(sum[:]))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(gitCmd(t, dir, "for-each-ref", "--format=%(refname) %(objectname)")), "\n") {
		out = append(out, "ref "+l)
	}
	for _, l := range strings.Split(strings.TrimSpace(gitCmd(t, dir, "cat-file", "--batch-all-objects", "--batch-check")), "\n") {
		out = append(out, "object "+l)
	}
	out = append(out, "HEAD "+strings.TrimSpace(gitCmd(t, dir, "rev-parse", "HEAD")))
	return out
}

// checkRepo fails t if dir differs from want (repoState), naming what.
func checkRepo(t *testing.T, dir string, want []string) {
	t.Helper()
	got := repoState(t, dir)
	if slices.Equal(got, want) {
		return
	}
	var diff []string
	for _, l := range want {
		if !slices.Contains(got, l) {
			diff = append(diff, "- "+l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			diff = append(diff, "+ "+l)
		}
	}
	t.Errorf("the repository changed:\n%s", strings.Join(diff, "\n"))
}
