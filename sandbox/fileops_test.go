package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostFiles is FileScripts running the scripts under sh on the host, with
// two writable places (ws and tmp) in a fresh directory, which it returns.
func hostFiles(t *testing.T, sh shell) (FileScripts, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"ws", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return FileScripts{Backend: "test", Roots: []string{dir + "/tmp", dir + "/ws"},
		Run: func(_ context.Context, outputCap int64, script string, args ...string) (int, string, string, error) {
			stdout, stderr, code := runScript(t, sh, script, args...)
			if int64(len(stdout)) > outputCap {
				t.Fatalf("the script wrote %d bytes, over its cap %d", len(stdout), outputCap)
			}
			return code, stdout, stderr, nil
		}}, dir
}

// build makes the tree the cases below work on, under dir.
func build(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ws := dir + "/ws"
	must(os.MkdirAll(ws+"/d/sub", 0o755))
	must(os.WriteFile(ws+"/d/sub/f", []byte("inner"), 0o644))
	must(os.MkdirAll(ws+"/empty", 0o700))
	must(os.WriteFile(ws+"/file", []byte("12345"), 0o640))
	must(os.WriteFile(ws+"/.hidden", nil, 0o600))
	must(os.WriteFile(ws+"/..dots", nil, 0o600))
	must(os.WriteFile(ws+"/new\nline", []byte("x"), 0o644))
	must(os.WriteFile(ws+"/-dash", nil, 0o644))
	must(os.WriteFile(ws+"/sp ace", nil, 0o644))
	must(os.Chmod(ws+"/sp ace", fs.ModeSetuid|0o755))
	must(os.Symlink("/etc", ws+"/etc"))
	must(os.Symlink("d", ws+"/dlink"))
	must(os.Symlink("/nonexistent", ws+"/dangling"))
	must(syscall.Mkfifo(ws+"/fifo", 0o600))
	must(os.Chtimes(ws+"/file", time.Unix(1e9, 0), time.Unix(1e9, 0)))
}

func TestFileScriptsListDir(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			f, dir := hostFiles(t, sh)
			build(t, dir)
			ctx := context.Background()
			got, err := f.ListDir(ctx, dir+"/ws")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			byName := map[string]FileInfo{}
			for _, e := range got {
				names = append(names, e.Name)
				byName[e.Name] = e
			}
			want := []string{"-dash", "..dots", ".hidden", "d", "dangling", "dlink", "empty", "etc", "fifo", "file", "new\nline", "sp ace"}
			if !slices.Equal(names, want) {
				t.Fatalf("ListDir names = %q; want %q", names, want)
			}
			for _, tc := range []struct {
				name string
				typ  FileType
				mode fs.FileMode
				size int64
			}{
				{"file", TypeFile, 0o640, 5},
				{"d", TypeDir, fs.ModeDir | 0o755, -1},
				{"empty", TypeDir, fs.ModeDir | 0o700, -1},
				{"etc", TypeSymlink, fs.ModeSymlink | 0o777, 4},
				{"dlink", TypeSymlink, fs.ModeSymlink | 0o777, 1},
				{"dangling", TypeSymlink, fs.ModeSymlink | 0o777, 12},
				{"fifo", TypeOther, fs.ModeNamedPipe | 0o600, 0},
				{"sp ace", TypeFile, fs.ModeSetuid | 0o755, 0},
				{"new\nline", TypeFile, 0o644, 1},
			} {
				e := byName[tc.name]
				if e.Type != tc.typ || e.Mode != tc.mode || (tc.size >= 0 && e.Size != tc.size) {
					t.Errorf("entry %q = %+v; want type %s, mode %v, size %d", tc.name, e, tc.typ, tc.mode, tc.size)
				}
			}
			if mt := byName["file"].ModTime; !mt.Equal(time.Unix(1e9, 0)) || mt.Location() != time.UTC {
				t.Errorf("ModTime = %v; want %v in UTC", mt, time.Unix(1e9, 0).UTC())
			}
			// The directory itself is followed when a symlink.
			if got, err := f.ListDir(ctx, dir+"/ws/dlink"); err != nil || len(got) != 1 || got[0].Name != "sub" {
				t.Errorf("ListDir(symlink to d) = %+v, %v; want [sub]", got, err)
			}
			if _, stderr, code := runScript(t, sh, ListShell, dir+"/ws", "11"); code != ExitTooManyEntries || stderr != "stockade: 12 entries\n" {
				t.Errorf("ListShell with a bound of 11 = exit %d, %q; want ExitTooManyEntries for 12 entries", code, stderr)
			}
			if got, err := f.ListDir(ctx, dir+"/ws/empty"); err != nil || len(got) != 0 {
				t.Errorf("ListDir(empty) = %+v, %v; want nothing", got, err)
			}
			for _, tc := range []struct {
				path string
				want error
			}{
				{dir + "/ws/missing", ErrFileNotExist},
				{dir + "/ws/dangling", ErrFileNotExist},
				{dir + "/ws/file", ErrNotDirectory},
				{dir + "/ws/fifo", ErrNotDirectory},
				{dir + "/ws/file/x", ErrNotDirectory},
				{dir + "/ws/missing/x", ErrFileNotExist},
			} {
				if _, err := f.ListDir(ctx, tc.path); !errors.Is(err, tc.want) {
					t.Errorf("ListDir(%s) = %v; want %v", tc.path, err, tc.want)
				}
			}
			for _, p := range []string{"", "rel", dir + "/ws/", dir + "/ws/../ws", "/", dir + "/a\nb"} {
				if _, err := f.ListDir(ctx, p); err == nil {
					t.Errorf("ListDir(%q) succeeded; want a refusal", p)
				}
			}
		})
	}
}

// TestFileScriptsListDirBound lists the largest directory ListDir lists,
// with the longest names, so that its output's bound holds, and one entry
// more. It runs under BusyBox's sh alone (what images have; a few seconds
// each); TestFileScriptsListDir checks the bound under every shell.
func TestFileScriptsListDirBound(t *testing.T) {
	for _, sh := range shells(t)[:1] {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			f, dir := hostFiles(t, sh)
			big := dir + "/ws/big"
			if err := os.Mkdir(big, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range MaxDirEntries {
				// The longest names there are, so the bound on the
				// output holds for the largest listing.
				name := strconv.Itoa(i) + strings.Repeat("n", 255-len(strconv.Itoa(i)))
				if err := os.WriteFile(big+"/"+name, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := f.ListDir(context.Background(), big)
			if err != nil || len(got) != MaxDirEntries {
				t.Fatalf("ListDir of %d entries = %d entries, %v", MaxDirEntries, len(got), err)
			}
			if err := os.WriteFile(big+"/.one-more", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ListDir(context.Background(), big); !errors.Is(err, ErrTooManyEntries) {
				t.Errorf("ListDir of %d entries = %v; want ErrTooManyEntries", MaxDirEntries+1, err)
			}
		})
	}
}

func TestFileScriptsStat(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			f, dir := hostFiles(t, sh)
			build(t, dir)
			ctx := context.Background()
			for _, tc := range []struct {
				path string
				typ  FileType
				size int64
			}{
				{dir + "/ws/file", TypeFile, 5},
				{dir + "/ws/etc", TypeSymlink, 4},
				{dir + "/ws/dangling", TypeSymlink, 12},
				{dir + "/ws/d", TypeDir, -1},
				{dir + "/ws/dlink/sub/f", TypeFile, 5},
				{"/etc", TypeDir, -1},
			} {
				got, err := f.Stat(ctx, tc.path)
				if err != nil || got.Type != tc.typ || (tc.size >= 0 && got.Size != tc.size) || got.Name != filepath.Base(tc.path) {
					t.Errorf("Stat(%s) = %+v, %v; want a %s of %d bytes", tc.path, got, err, tc.typ, tc.size)
				}
			}
			for _, tc := range []struct {
				path string
				want error
			}{
				{dir + "/ws/missing", ErrFileNotExist},
				{dir + "/ws/file/x", ErrNotDirectory},
				{dir + "/ws/dangling/x", ErrNotDirectory},
			} {
				if _, err := f.Stat(ctx, tc.path); !errors.Is(err, tc.want) {
					t.Errorf("Stat(%s) = %v; want %v", tc.path, err, tc.want)
				}
			}
		})
	}
}

func TestFileScriptsChanges(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			f, dir := hostFiles(t, sh)
			build(t, dir)
			ctx := context.Background()
			ws := dir + "/ws"
			for _, tc := range []struct {
				name string
				do   func() error
				want error // nil: success
			}{
				{"mkdir nested", func() error { return f.MakeDir(ctx, ws+"/m/n/o") }, nil},
				{"mkdir existing", func() error { return f.MakeDir(ctx, ws+"/d") }, nil},
				{"mkdir a root", func() error { return f.MakeDir(ctx, ws) }, nil},
				{"mkdir through a symlink to a dir", func() error { return f.MakeDir(ctx, ws+"/dlink/new") }, nil},
				{"mkdir over a file", func() error { return f.MakeDir(ctx, ws+"/file") }, ErrNotDirectory},
				{"mkdir over a dangling symlink", func() error { return f.MakeDir(ctx, ws+"/dangling") }, ErrNotDirectory},
				{"mkdir below a file", func() error { return f.MakeDir(ctx, ws+"/file/x/y") }, ErrNotDirectory},
				{"mkdir outside", func() error { return f.MakeDir(ctx, dir+"/elsewhere") }, ErrNotWritable},
				{"mkdir a temporary's name", func() error { return f.MakeDir(ctx, ws+"/"+TempPrefix+"x") }, errAny},
				{"remove a file", func() error { return f.Remove(ctx, ws+"/-dash", RemoveOptions{}) }, nil},
				{"remove a symlink to a dir", func() error { return f.Remove(ctx, ws+"/dlink", RemoveOptions{}) }, nil},
				{"remove a fifo", func() error { return f.Remove(ctx, ws+"/fifo", RemoveOptions{}) }, nil},
				{"remove a newline's name", func() error { return f.Remove(ctx, ws+"/new\nline", RemoveOptions{}) }, errAny},
				{"remove a dir", func() error { return f.Remove(ctx, ws+"/empty", RemoveOptions{}) }, ErrIsDirectory},
				{"remove a dir recursively", func() error { return f.Remove(ctx, ws+"/d", RemoveOptions{Recursive: true}) }, nil},
				{"remove missing", func() error { return f.Remove(ctx, ws+"/missing", RemoveOptions{}) }, ErrFileNotExist},
				{"remove below a file", func() error { return f.Remove(ctx, ws+"/file/x", RemoveOptions{}) }, ErrNotDirectory},
				{"remove a root", func() error { return f.Remove(ctx, ws, RemoveOptions{Recursive: true}) }, ErrNotReplaceable},
				{"remove outside", func() error { return f.Remove(ctx, dir+"/x", RemoveOptions{}) }, ErrNotWritable},
				{"rename to new parents", func() error { return f.Rename(ctx, ws+"/.hidden", ws+"/p/q/hidden") }, nil},
				{"rename over a file", func() error { return f.Rename(ctx, ws+"/p/q/hidden", ws+"/file") }, nil},
				{"rename over a dir", func() error { return f.Rename(ctx, ws+"/file", ws+"/empty") }, ErrIsDirectory},
				{"rename over a symlink to a dir", func() error { return f.Rename(ctx, ws+"/file", ws+"/etc") }, ErrIsDirectory},
				{"rename over a dangling symlink", func() error { return f.Rename(ctx, ws+"/..dots", ws+"/dangling") }, nil},
				{"rename a dir over a file", func() error { return f.Rename(ctx, ws+"/empty", ws+"/file") }, ErrNotDirectory},
				{"rename a dir", func() error { return f.Rename(ctx, ws+"/empty", ws+"/moved") }, nil},
				{"rename a dir into itself", func() error { return f.Rename(ctx, ws+"/moved", ws+"/moved/x") }, errAny},
				{"rename to itself", func() error { return f.Rename(ctx, ws+"/file", ws+"/file") }, nil},
				{"rename missing", func() error { return f.Rename(ctx, ws+"/missing", ws+"/x") }, ErrFileNotExist},
				{"rename below a file", func() error { return f.Rename(ctx, ws+"/file", ws+"/file/x") }, errAny},
				{"rename to below a file", func() error { return f.Rename(ctx, ws+"/sp ace", ws+"/file/x") }, ErrNotDirectory},
				{"rename across places", func() error { return f.Rename(ctx, ws+"/file", dir+"/tmp/file") }, ErrCrossDevice},
				{"rename a root", func() error { return f.Rename(ctx, ws, dir+"/tmp/ws") }, ErrNotReplaceable},
				{"rename onto a root", func() error { return f.Rename(ctx, ws+"/file", ws) }, ErrIsDirectory},
				{"rename from outside", func() error { return f.Rename(ctx, "/etc/passwd", ws+"/passwd") }, ErrNotWritable},
				{"rename to outside", func() error { return f.Rename(ctx, ws+"/file", "/etc/x") }, ErrNotWritable},
			} {
				err := tc.do()
				switch {
				case tc.want == nil && err != nil:
					t.Errorf("%s = %v; want success", tc.name, err)
				case tc.want == errAny && err == nil:
					t.Errorf("%s succeeded; want a refusal", tc.name)
				case tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
					t.Errorf("%s = %v; want %v", tc.name, err, tc.want)
				}
			}
			// What the cases above did.
			for p, typ := range map[string]FileType{
				ws + "/m/n/o": TypeDir, ws + "/etc": TypeSymlink, "/etc/passwd": TypeFile,
				ws + "/file": TypeFile, ws + "/moved": TypeDir, ws + "/dangling": TypeFile,
			} {
				if got, err := f.Stat(ctx, p); err != nil || got.Type != typ {
					t.Errorf("afterwards, Stat(%s) = %+v, %v; want a %s", p, got, err, typ)
				}
			}
			for _, p := range []string{ws + "/-dash", ws + "/dlink", ws + "/fifo", ws + "/d/sub", ws + "/.hidden", ws + "/empty", ws + "/..dots"} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("afterwards, %s: %v; want it gone", p, err)
				}
			}
			if b, err := os.ReadFile(ws + "/file"); err != nil || len(b) != 0 {
				t.Errorf("the renamed-over file holds %q, %v; want the empty .hidden", b, err)
			}
		})
	}
}

func TestParseListing(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want []string // nil: an error
	}{
		{"empty", "", []string{}},
		{"blocks sorted", "b\x00a\x00\x0081a4 1 0\n81a4 2 0\n.c\x00\x0041ed 3 0\n", []string{".c", "a", "b"}},
		{"no end of names", "a\x00", nil},
		{"an empty block", "\x00", nil},
		{"a dot", ".\x00\x0041ed 1 0\n", nil},
		{"a slash", "a/b\x00\x0081a4 1 0\n", nil},
		{"twice", "a\x00\x0081a4 1 0\na\x00\x0081a4 1 0\n", nil},
		{"a line short", "a\x00b\x00\x0081a4 1 0\n", nil},
		{"a bad line", "a\x00\x0081a4 x 0\n", nil},
		{"a negative size", "a\x00\x0081a4 -1 0\n", nil},
		{"a field more", "a\x00\x0081a4 1 0 9\n", nil},
	} {
		got, err := ParseListing([]byte(tc.out))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: ParseListing = %+v; want an error", tc.name, got)
			}
			continue
		}
		names := []string{}
		for _, e := range got {
			names = append(names, e.Name)
		}
		if err != nil || !slices.Equal(names, tc.want) {
			t.Errorf("%s: ParseListing = %q, %v; want %q", tc.name, names, err, tc.want)
		}
	}
}

func TestFileMode(t *testing.T) {
	for _, tc := range []struct {
		raw  uint32
		typ  FileType
		mode fs.FileMode
	}{
		{0o100644, TypeFile, 0o644},
		{0o104755, TypeFile, fs.ModeSetuid | 0o755},
		{0o041777, TypeDir, fs.ModeDir | fs.ModeSticky | 0o777},
		{0o042755, TypeDir, fs.ModeDir | fs.ModeSetgid | 0o755},
		{0o120777, TypeSymlink, fs.ModeSymlink | 0o777},
		{0o010600, TypeOther, fs.ModeNamedPipe | 0o600},
		{0o140755, TypeOther, fs.ModeSocket | 0o755},
		{0o020666, TypeOther, fs.ModeDevice | fs.ModeCharDevice | 0o666},
		{0o060660, TypeOther, fs.ModeDevice | 0o660},
		{0o000644, TypeOther, fs.ModeIrregular | 0o644},
	} {
		if typ, mode := fileMode(tc.raw); typ != tc.typ || mode != tc.mode {
			t.Errorf("fileMode(%o) = %s, %v; want %s, %v", tc.raw, typ, mode, tc.typ, tc.mode)
		}
	}
}
