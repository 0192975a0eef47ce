package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/agent"
	"github.com/stockade/stockade/internal/enginetest"
)

// shell is a POSIX shell to run the scripts with on the host.
type shell struct {
	name string   // "busybox" or "dash"
	argv []string // what comes before -c; nil when it is not installed
}

// shells returns the shells every script is tested under: BusyBox's ash
// (what minimal images, ours included, have) and dash (Debian's /bin/sh).
// Each test runs a subtest per shell, which calls need first.
func shells(t *testing.T) []shell {
	bb := shell{name: "busybox"}
	if p, err := exec.LookPath("/bin/busybox"); err == nil {
		bb.argv = []string{p, "sh"}
	} else if p, err := exec.LookPath("busybox"); err == nil {
		bb.argv = []string{p, "sh"}
	}
	dash := shell{name: "dash"}
	if p, err := exec.LookPath("dash"); err == nil {
		dash.argv = []string{p}
	}
	return []shell{bb, dash}
}

// need skips t when sh is not installed, or fails it when
// STOCKADE_REQUIRE_ENGINE=1 (as in CI), so the scripts cannot pass
// untested there.
func (sh shell) need(t *testing.T) {
	t.Helper()
	if sh.argv != nil {
		return
	}
	if enginetest.Required() {
		t.Fatalf("%s is not installed (%s=1 requires every shell)", sh.name, enginetest.RequireEnv)
	}
	t.Skipf("%s is not installed (set %s=1 to fail instead)", sh.name, enginetest.RequireEnv)
}

// runScript runs script with args under sh and returns stdout, stderr and
// the exit code.
func runScript(t *testing.T, sh shell, script string, args ...string) (string, string, int) {
	t.Helper()
	argv := append(append(append([]string{}, sh.argv[1:]...), "-c", script, "stockade"), args...)
	cmd := exec.Command(sh.argv[0], argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// extract plays the engine: it unpacks a tar into dir. Paths in the test
// are container paths prefixed with the temporary directory.
func extract(t *testing.T, dir string, r io.Reader) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			os.RemoveAll(p)
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, os.FileMode(h.Mode))
			os.Chtimes(p, h.ModTime, h.ModTime)
		default:
			t.Fatalf("unexpected member type %c", h.Typeflag)
		}
	}
}

// tree lists every path under dir with its mode and content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := strings.TrimPrefix(p, dir)
		if fi.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, _ := os.ReadFile(p)
		out[rel] = fi.Mode().Perm().String() + " " + string(b)
		return nil
	})
	return out
}

// lander carries out a BulkWrite on the host with BulkWrite.Run, as a
// backend does: with the scripts under a shell (extract playing the
// engine's upload), or in one step with the Docker agent's WriteFiles
// (BulkOps.Land), whose semantics must be the scripts'.
type lander struct {
	name  string
	sh    shell
	agent bool
}

// landers returns the scripts under each shell, then the agent.
func landers(t *testing.T) []lander {
	var out []lander
	for _, sh := range shells(t) {
		out = append(out, lander{name: sh.name, sh: sh})
	}
	return append(out, lander{name: "agent", agent: true})
}

func (l lander) need(t *testing.T) {
	if !l.agent {
		l.sh.need(t)
	}
}

// run writes files (b's plan) with l and returns Run's error.
func (l lander) run(t *testing.T, b *BulkWrite, files []FileWrite) error {
	t.Helper()
	sh := l.sh
	if l.agent {
		sh = shells(t)[0] // the discard's; the agent runs no script otherwise
		sh.need(t)
	}
	ops := BulkOps{
		Script: func(_ context.Context, script string, args ...string) (int, string, string, error) {
			stdout, stderr, code := runScript(t, sh, script, args...)
			return code, stdout, stderr, nil
		},
		Put: func(_ context.Context, dir string, write func(io.Writer) error) error {
			var ar bytes.Buffer
			if err := write(&ar); err != nil {
				return err
			}
			extract(t, dir, &ar)
			return nil
		},
		Discard: func(_ context.Context, b *BulkWrite) { runScript(t, sh, BulkDiscardShell, b.Delivered()...) },
	}
	if l.agent {
		ops.Script = func(_ context.Context, script string, args ...string) (int, string, string, error) {
			if script != BulkDiscardShell {
				t.Errorf("the agent's write ran a script")
			}
			stdout, stderr, code := runScript(t, sh, script, args...)
			return code, stdout, stderr, nil
		}
		ops.Land = func(_ context.Context, b *BulkWrite) (int, string, error) {
			files, temp, mtime := b.Plan()
			req := agent.WriteRequest{Temp: temp, MTime: mtime.Unix()}
			var data [][]byte
			for _, f := range files {
				req.Files = append(req.Files, agent.WriteFile{Path: f.Path, Size: int64(len(f.Data))})
				data = append(data, f.Data)
			}
			var stderr bytes.Buffer
			code := agent.WriteFiles(req, data, &stderr)
			return code, stderr.String(), nil
		}
	}
	return b.Run(context.Background(), "test", files, ops)
}

// TestAgentExitCodes holds the agent's codes to this package's.
func TestAgentExitCodes(t *testing.T) {
	if agent.ExitStage != ExitBulkStage {
		t.Errorf("agent.ExitStage = %d; want ExitBulkStage (%d)", agent.ExitStage, ExitBulkStage)
	}
	for _, c := range []int{ExitPathIsDirectory, ExitPathNotDirectory, ExitPathNotReplaceable, ExitPathNotWritable, ExitBulkExtract, ExitBulkMode, ExitFileNotExist, ExitNotRegularFile, ExitFileTooLarge} {
		if c == agent.ExitReadRefused || c == agent.ExitStage {
			t.Errorf("agent code %d is also a script's", c)
		}
	}
}

func TestBulkWriteLands(t *testing.T) {
	for _, l := range landers(t) {
		t.Run(l.name, func(t *testing.T) {
			l.need(t)
			root := t.TempDir()
			w := root + "/w"
			os.MkdirAll(w+"/old", 0o755)
			os.WriteFile(w+"/old/keep.sh", []byte("old"), 0o750)
			os.WriteFile(w+"/old/same", []byte("old"), 0o644)
			os.WriteFile(w+"/old/x.sh", []byte("old"), 0o700)
			os.WriteFile(w+"/old/secret", []byte("s"), 0o600)
			os.Symlink("secret", w+"/old/link")
			os.Symlink("/nonexistent", w+"/old/dangling")
			files := []FileWrite{
				{Path: w + "/a.txt", Data: []byte("a")},
				{Path: w + "/old/keep.sh", Data: []byte("new")},
				{Path: w + "/new/deep/b c.txt", Data: []byte("b")},
				{Path: w + "/old/same", Data: nil},
				{Path: w + "/z", Data: []byte("z")},
				{Path: w + "/.hidden", Data: []byte("h")},
				{Path: w + "/..dots", Data: []byte("d")},
				{Path: w + "/old/x.sh", Data: []byte("x")},
				{Path: w + "/old/link", Data: []byte("l")},
				{Path: w + "/old/dangling", Data: []byte("g")},
			}
			b, err := NewBulkWrite(w, files)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.run(t, b, files); err != nil {
				t.Fatalf("WriteFiles: %v", err)
			}
			for _, f := range files {
				if fi, err := os.Stat(f.Path); err != nil || !fi.ModTime().Equal(b.mtime) {
					t.Errorf("%s: mtime %v, %v; want %v", f.Path, fi.ModTime(), err, b.mtime)
				}
			}
			want := map[string]string{
				"/w":                  "dir",
				"/w/a.txt":            "-rw-r--r-- a",
				"/w/z":                "-rw-r--r-- z",
				"/w/.hidden":          "-rw-r--r-- h",
				"/w/..dots":           "-rw-r--r-- d",
				"/w/old/x.sh":         "-rwx------ x",
				"/w/old":              "dir",
				"/w/old/keep.sh":      "-rwxr-x--- new",
				"/w/old/same":         "-rw-r--r-- ",
				"/w/old/secret":       "-rw------- s",
				"/w/old/link":         "-rw-r--r-- l",
				"/w/old/dangling":     "-rw-r--r-- g",
				"/w/new":              "dir",
				"/w/new/deep":         "dir",
				"/w/new/deep/b c.txt": "-rw-r--r-- b",
			}
			if got := tree(t, root); !reflect.DeepEqual(got, want) {
				t.Errorf("after WriteFiles: %q\nwant %q", got, want)
			}
		})
	}
}

func TestBulkWriteFaults(t *testing.T) {
	for _, l := range landers(t) {
		for _, tt := range []struct {
			name    string
			setup   func(w string)
			second  string // the failing target, relative to w
			wantErr error
		}{
			{"directory", func(w string) { os.MkdirAll(w+"/d", 0o755) }, "/d", ErrIsDirectory},
			{"parent is a file", func(w string) { os.WriteFile(w+"/f", nil, 0o644) }, "/f/x/y", ErrNotDirectory},
			{"dangling parent link", func(w string) { os.Symlink("/nonexistent/dir", w+"/l") }, "/l/x", ErrNotDirectory},
		} {
			t.Run(l.name+"/"+tt.name, func(t *testing.T) {
				l.need(t)
				root := t.TempDir()
				w := root + "/w"
				os.MkdirAll(w, 0o755)
				tt.setup(w)
				before := tree(t, root)
				files := []FileWrite{{Path: w + "/first", Data: []byte("1")}, {Path: w + tt.second, Data: []byte("2")}, {Path: w + "/third", Data: []byte("3")}}
				b, err := NewBulkWrite(w, files)
				if err != nil {
					t.Fatal(err)
				}
				ferr := l.run(t, b, files)
				if !errors.Is(ferr, tt.wantErr) || !strings.Contains(ferr.Error(), w+tt.second) {
					t.Fatalf("fault = %v; want %v naming %s", ferr, tt.wantErr, w+tt.second)
				}
				want := before
				want["/w/first"] = "-rw-r--r-- 1"
				if got := tree(t, root); !reflect.DeepEqual(got, want) {
					t.Errorf("after the fault: %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestBulkWriteShortDelivery(t *testing.T) {
	for _, sh := range shells(t) {
		for _, tt := range []struct {
			name     string
			deliver  func(b *BulkWrite, w io.Writer) error
			wantCode int
			lost     bool
		}{
			{"no bookkeeping", (*BulkWrite).Members, ExitBulkIncomplete, true},
			{"no members", (*BulkWrite).Bookkeeping, ExitBulkExtract, false},
		} {
			t.Run(sh.name+"/"+tt.name, func(t *testing.T) {
				sh.need(t)
				root := t.TempDir()
				w := root + "/w"
				os.MkdirAll(w, 0o755)
				os.WriteFile(w+"/a", []byte("old"), 0o644)
				before := tree(t, root)
				b, _ := NewBulkWrite(w, []FileWrite{{Path: w + "/a", Data: []byte("new")}, {Path: w + "/b", Data: []byte("b")}})
				var ar bytes.Buffer
				tt.deliver(b, &ar)
				extract(t, w, &ar)
				stdout, stderr, code := runScript(t, sh, BulkRenameShell, b.Manifest, b.DirList)
				if code != tt.wantCode || b.LostItsList(stdout) != tt.lost {
					t.Fatalf("rename exit %d, lost %v (stderr %q); want %d, %v", code, b.LostItsList(stdout), stderr, tt.wantCode, tt.lost)
				}
				if err := b.Fault("test", code, stderr); err == nil {
					t.Fatalf("Fault(%d) = nil", code)
				}
				stdout, _, _ = runScript(t, sh, BulkDiscardShell, b.Delivered()...)
				if left := b.LeftBehind(stdout); len(left) != 0 {
					t.Errorf("LeftBehind = %q", left)
				}
				if got := tree(t, root); !reflect.DeepEqual(got, before) {
					t.Errorf("after a short delivery: %q\nwant %q (nothing landed, nothing left)", got, before)
				}
			})
		}
	}
}

// TestBulkRenameModeFails checks that a staged file whose mode cannot be set
// stops the landing: here the sandbox swapped it for a dangling symlink, so
// chmod fails, and nothing may land.
func TestBulkRenameModeFails(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			root := t.TempDir()
			w := root + "/w"
			os.MkdirAll(w, 0o755)
			os.WriteFile(w+"/a", []byte("old"), 0o700)
			b, err := NewBulkWrite(w, []FileWrite{{Path: w + "/a", Data: []byte("new")}, {Path: w + "/b", Data: []byte("b")}})
			if err != nil {
				t.Fatal(err)
			}
			var ar bytes.Buffer
			if err := b.Archive(&ar); err != nil {
				t.Fatal(err)
			}
			extract(t, w, &ar)
			staged := w + "/" + b.tmp + "/a"
			os.Remove(staged)
			if err := os.Symlink("/nonexistent", staged); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runScript(t, sh, BulkRenameShell, b.Manifest, b.DirList)
			if code != ExitBulkMode {
				t.Fatalf("rename exit %d (stderr %q); want ExitBulkMode (%d)", code, stderr, ExitBulkMode)
			}
			if err := b.Fault("test", code, stderr); !errors.Is(err, errModeNotKept) {
				t.Errorf("Fault = %v; want errModeNotKept", err)
			}
			if got, _ := os.ReadFile(w + "/a"); string(got) != "old" {
				t.Errorf("a = %q after a failed mode copy; want it untouched", got)
			}
			if _, err := os.Lstat(w + "/b"); err == nil {
				t.Errorf("b landed after a failed mode copy")
			}
		})
	}
}

func TestPathFaultShell(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			root := t.TempDir()
			os.MkdirAll(root+"/d", 0o755)
			os.WriteFile(root+"/f", nil, 0o644)
			for _, tt := range []struct {
				path string
				want int
			}{
				{root + "/new", 0},
				{root + "/f", 0},
				{root + "/x/y/z", 0},
				{root + "/d", ExitPathIsDirectory},
				{root + "/f/x", ExitPathNotDirectory},
			} {
				_, stderr, code := runScript(t, sh, PathFaultShell, tt.path)
				if code != tt.want {
					t.Errorf("PathFaultShell %s = %d (%q); want %d", tt.path, code, stderr, tt.want)
				}
			}
			if os.Geteuid() != 0 {
				os.MkdirAll(root+"/ro", 0o555)
				if _, _, code := runScript(t, sh, PathFaultShell, root+"/ro/x"); code != ExitPathNotWritable {
					t.Errorf("PathFaultShell in a 0555 directory = %d; want %d", code, ExitPathNotWritable)
				}
			}
			if _, _, code := runScript(t, sh, UnreplaceableShell, root+"/f", root+"/missing"); code != 0 {
				t.Errorf("UnreplaceableShell of an ordinary file = %d; want 0", code)
			}
			if _, _, code := runScript(t, sh, UnreplaceableShell, "/proc"); code != ExitPathNotReplaceable {
				t.Errorf("UnreplaceableShell of a mount point = %d; want %d", code, ExitPathNotReplaceable)
			}
		})
	}
}

func TestNewBulkWriteRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		root  string
		files []FileWrite
		want  string
	}{
		{"relative", "/w", []FileWrite{{Path: "a"}}, "absolute"},
		{"unclean", "/w", []FileWrite{{Path: "/w/../etc/x"}}, "absolute"},
		{"outside", "/w", []FileWrite{{Path: "/etc/x"}}, "cannot write"},
		{"the root itself", "/w", []FileWrite{{Path: "/w"}}, "cannot write"},
		{"duplicate", "/w", []FileWrite{{Path: "/w/a"}, {Path: "/w/a"}}, "twice"},
		{"temp name", "/w", []FileWrite{{Path: "/w/" + TempPrefix + "x"}}, "reserved"},
		{"too large", "/w", []FileWrite{{Path: "/w/a", Data: make([]byte, MaxFileBytes+1)}}, "too large"},
		{"newline", "/w", []FileWrite{{Path: "/w/a\nb"}}, "control"},
		{"bad root", "w", nil, "root"},
	} {
		if _, err := NewBulkWrite(tt.root, tt.files); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewBulkWrite = %v; want %q", tt.name, err, tt.want)
		}
	}
	_, err := NewBulkWrite("/w", []FileWrite{{Path: "/etc/x"}})
	if !errors.Is(err, ErrNotWritable) {
		t.Errorf("NewBulkWrite outside the root = %v; want ErrNotWritable", err)
	}
}

func TestBulkWriteLeftBehindAndEmptyArchive(t *testing.T) {
	b, err := NewBulkWrite("/w", []FileWrite{{Path: "/w/a/x"}, {Path: "/w/y"}})
	if err != nil {
		t.Fatal(err)
	}
	d := b.Delivered()
	want := []string{"/w/a/" + b.tmp, "/w/" + b.tmp, b.Manifest, b.DirList}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Delivered() = %q; want %q", d, want)
	}
	out := "left " + d[0] + "\nleft /etc/passwd\nnoise\nleft " + d[0] + "\nleft " + b.Manifest + "\n"
	if got := b.LeftBehind(out); !reflect.DeepEqual(got, []string{d[0], b.Manifest}) {
		t.Errorf("LeftBehind = %q; want only delivered paths, once", got)
	}
	var buf bytes.Buffer
	if err := b.EmptyArchive([]string{"/etc/passwd"}, &buf); err == nil {
		t.Errorf("EmptyArchive of a path not delivered succeeded")
	}
	buf.Reset()
	if err := b.EmptyArchive([]string{d[0]}, &buf); err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(&buf).Next()
	if err != nil || h.Name != "a/"+b.tmp || h.Size != 0 || h.Typeflag != tar.TypeReg {
		t.Errorf("EmptyArchive member = %+v, %v", h, err)
	}
}

func TestFault(t *testing.T) {
	files := []FileWrite{{Path: "/w/a"}, {Path: "/w/b"}, {Path: "/w/c"}}
	for _, tt := range []struct {
		code      int
		stderr    string
		want      error
		remaining int
	}{
		{0, "", nil, 3},
		{ExitPathIsDirectory, "stockade: fault 1 /w/b\n", ErrIsDirectory, 1},
		{ExitPathNotDirectory, "noise\nstockade: fault 2 /w/c\n", ErrNotDirectory, 2},
		{ExitPathNotReplaceable, "stockade: fault 0 /w/a\n", ErrNotReplaceable, 0},
		{ExitPathNotWritable, "stockade: fault 1 /w/b\n", ErrNotWritable, 1},
		{ExitPathIsDirectory, "stockade: fault 1 /w/WRONG\n", ErrIsDirectory, 0},
		{ExitPathIsDirectory, "stockade: fault 9 /w/b\n", ErrIsDirectory, 0},
		{ExitBulkIncomplete, "", errIncomplete, 0},
		{ExitBulkExtract, "", errIncomplete, 0},
		{ExitBulkMode, "stockade: cannot preserve modes\n", errModeNotKept, 0},
		{1, "boom", nil, 0},
	} {
		b, _ := NewBulkWrite("/w", files)
		err := b.Fault("docker", tt.code, tt.stderr)
		if tt.code == 0 && err != nil || tt.code != 0 && err == nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Fault(%d, %q) = %v; want %v", tt.code, tt.stderr, err, tt.want)
		}
		if b.n != tt.remaining {
			t.Errorf("Fault(%d, %q) left %d files; want %d", tt.code, tt.stderr, b.n, tt.remaining)
		}
	}
}

// TestRunLandFallsBack: a Land that stopped part way (ErrNotLanded) has
// what it staged discarded and the write done by the scripts; one that
// fails otherwise has it discarded and its error returned.
func TestRunLandFallsBack(t *testing.T) {
	sh := shells(t)[0]
	sh.need(t)
	for _, tc := range []struct {
		name    string
		landErr error
		want    error // nil: the scripts land the write
	}{
		{"stopped", fmt.Errorf("%w: the agent is gone", ErrNotLanded), nil},
		{"final", ErrNotWritable, ErrNotWritable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			w := root + "/w"
			os.MkdirAll(w+"/d", 0o755)
			files := []FileWrite{{Path: w + "/d/a", Data: []byte("a")}, {Path: w + "/b", Data: []byte("b")}}
			b, err := NewBulkWrite(w, files)
			if err != nil {
				t.Fatal(err)
			}
			ops := BulkOps{
				Script: func(_ context.Context, script string, args ...string) (int, string, string, error) {
					stdout, stderr, code := runScript(t, sh, script, args...)
					return code, stdout, stderr, nil
				},
				Put: func(_ context.Context, dir string, write func(io.Writer) error) error {
					var ar bytes.Buffer
					write(&ar)
					extract(t, dir, &ar)
					return nil
				},
				Discard: func(_ context.Context, b *BulkWrite) { runScript(t, sh, BulkDiscardShell, b.Delivered()...) },
				Land: func(_ context.Context, b *BulkWrite) (int, string, error) {
					_, temp, _ := b.Plan()
					os.MkdirAll(w+"/d/"+temp, 0o700) // staged, then lost
					os.WriteFile(w+"/d/"+temp+"/a", []byte("half"), 0o644)
					return 0, "", tc.landErr
				},
			}
			err = b.Run(context.Background(), "test", files, ops)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v; want %v", err, tc.want)
			}
			want := map[string]string{"/w": "dir", "/w/d": "dir"}
			if tc.want == nil {
				want["/w/d/a"], want["/w/b"] = "-rw-r--r-- a", "-rw-r--r-- b"
			}
			if got := tree(t, root); !reflect.DeepEqual(got, want) {
				t.Errorf("after Run: %q\nwant %q", got, want)
			}
		})
	}
}
