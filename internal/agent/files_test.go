package agent

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileOps: a write and reads through the channel to the real Serve,
// in the agent's own process (the host here).
func TestFileOps(t *testing.T) {
	p := open(t, nil, nil)
	dir := t.TempDir()
	os.WriteFile(dir+"/old", []byte("old"), 0o750)
	os.Chmod(dir+"/old", 0o750)
	mtime := time.Unix(1_700_000_000, 0)
	req := WriteRequest{Temp: ".stockade-tmp-test", MTime: mtime.Unix(), Files: []WriteFile{
		{Path: dir + "/old", Size: 3}, {Path: dir + "/new/deep/f", Size: 1 << 20}, {Path: dir + "/empty", Size: 0},
	}}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	var stderr bytes.Buffer
	k, err := p.conn.Write(req, [][]byte{[]byte("new"), big, nil}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := wait(t, k); code != 0 || err != nil {
		t.Fatalf("write = %d, %v (%q); want 0", code, err, stderr.String())
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
		data []byte
	}{{"/old", 0o750, []byte("new")}, {"/new/deep/f", 0o644, big}, {"/empty", 0o644, nil}} {
		fi, err := os.Stat(dir + tc.path)
		got, _ := os.ReadFile(dir + tc.path)
		if err != nil || fi.Mode().Perm() != tc.mode || !fi.ModTime().Equal(mtime) || !bytes.Equal(got, tc.data) {
			t.Errorf("%s: %v, %v, %d bytes; want mode %v, mtime %v, %d bytes", tc.path, fi.Mode(), err, len(got), tc.mode, mtime, len(tc.data))
		}
	}
	if m, _ := filepath.Glob(dir + "/*/.stockade-tmp-*"); len(m) != 0 {
		t.Errorf("staging left: %q", m)
	}
	if fi, err := os.Stat(dir + "/new"); err != nil || fi.Mode().Perm() != 0o777&^testUmask() {
		t.Errorf("new parent: %v, %v; want mkdir -p's mode", fi.Mode(), err)
	}

	syscall.Mkfifo(dir+"/fifo", 0o644)
	os.WriteFile(dir+"/small", []byte("12345"), 0o644)
	for _, tc := range []struct {
		path string
		max  int64
		code int
		out  string
	}{
		{dir + "/small", 5, 0, "5\n12345"},
		{dir + "/small", 4, exitFileTooLarge, "5\n"},
		{dir, 5, exitPathIsDirectory, ""},
		{dir + "/missing", 5, exitFileNotExist, ""},
		{dir + "/small/x", 5, exitFileNotExist, ""},
		{dir + "/fifo", 5, exitNotRegularFile, ""}, // never opened: it would block
	} {
		var out bytes.Buffer
		k, err := p.conn.Read(ReadRequest{Path: tc.path, Max: tc.max}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := wait(t, k); code != tc.code || err != nil || out.String() != tc.out {
			t.Errorf("read %s (max %d) = %d, %v, %q; want %d, %q", tc.path, tc.max, code, err, out.String(), tc.code, tc.out)
		}
	}
	var out bytes.Buffer
	k, _ = p.conn.Read(ReadRequest{Path: dir + "/new/deep/f", Max: 1 << 20}, &out)
	if code, err := wait(t, k); code != 0 || err != nil || !bytes.Equal(out.Bytes(), append([]byte("1048576\n"), big...)) {
		t.Errorf("read of 1 MiB = %d, %v, %d bytes", code, err, out.Len())
	}
	// A request the agent cannot decode is never started.
	k, _ = p.conn.Read(ReadRequest{Path: "relative", Max: 1}, &out)
	if _, err := wait(t, k); !errors.Is(err, ErrNotStarted) {
		t.Errorf("read of a relative path = %v; want ErrNotStarted", err)
	}
}

func testUmask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// TestFileOpsNeedVersion2: an agent of version 1 is never sent a file
// operation, and its channel goes on.
func TestFileOpsNeedVersion2(t *testing.T) {
	got := make(chan byte, 4)
	p := open(t, func(in io.Reader, out io.Writer) {
		hello(out)
		for {
			f, err := readFrame(in, func(byte) int { return MaxRequest })
			if err != nil {
				return
			}
			got <- f.typ
		}
	}, nil)
	if _, err := p.conn.Write(WriteRequest{Temp: "t"}, nil, nil); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Write to a version 1 agent = %v; want ErrNotStarted", err)
	}
	if _, err := p.conn.Read(ReadRequest{Path: "/x"}, nil); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Read from a version 1 agent = %v; want ErrNotStarted", err)
	}
	if _, err := p.conn.Run(Request{Argv: []string{"/bin/true"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case typ := <-got:
		if typ != TypeRun {
			t.Errorf("the version 1 agent got %q first; want only the run", typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run never came")
	}
	if p.conn.Err() != nil {
		t.Errorf("channel ended: %v", p.conn.Err())
	}
}

func TestDecodeWriteRefuses(t *testing.T) {
	good, _ := EncodeWrite(WriteRequest{Temp: "t", Files: []WriteFile{{Path: "/w/a", Size: 1}}}, [][]byte{[]byte("a")})
	if _, _, err := decodeWrite(good); err != nil {
		t.Fatalf("decodeWrite(good) = %v", err)
	}
	enc := func(req WriteRequest, extra string) []byte {
		b, _ := EncodeWrite(req, make([][]byte, len(req.Files)))
		return append(b, extra...)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"short", []byte{0, 0}, "short"},
		{"head past the end", []byte{0, 0, 1, 0, '{'}, "past"},
		{"no temp", enc(WriteRequest{}, ""), "staging"},
		{"temp with a slash", enc(WriteRequest{Temp: "a/b"}, ""), "staging"},
		{"temp dot-dot", enc(WriteRequest{Temp: ".."}, ""), "staging"},
		{"relative path", enc(WriteRequest{Temp: "t", Files: []WriteFile{{Path: "a"}}}, ""), "bad path"},
		{"unclean path", enc(WriteRequest{Temp: "t", Files: []WriteFile{{Path: "/w/../etc/x"}}}, ""), "bad path"},
		{"root", enc(WriteRequest{Temp: "t", Files: []WriteFile{{Path: "/"}}}, ""), "bad path"},
		{"size past the end", good[:len(good)-1], "past the payload"},
		{"trailing bytes", append(append([]byte{}, good...), 'x'), "after the last"},
	} {
		if _, _, err := decodeWrite(tc.payload); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decodeWrite = %v; want %q", tc.name, err, tc.want)
		}
	}
	if _, err := EncodeWrite(WriteRequest{Files: []WriteFile{{Path: "/a", Size: 2}}}, [][]byte{[]byte("a")}); err == nil {
		t.Errorf("EncodeWrite with a wrong size succeeded")
	}
}

// TestPathFault is TestPathFaultShell's table for the agent's sf_fault.
func TestPathFault(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(root+"/d", 0o755)
	os.WriteFile(root+"/f", nil, 0o644)
	os.Symlink("/nonexistent/dir", root+"/l")
	for _, tc := range []struct {
		path string
		want int
	}{
		{root + "/new", 0},
		{root + "/f", 0},
		{root + "/x/y/z", 0},
		{root + "/d", exitPathIsDirectory},
		{root + "/f/x", exitPathNotDirectory},
		{root + "/l/x", exitPathNotDirectory},
	} {
		if got := pathFault(tc.path); got != tc.want {
			t.Errorf("pathFault(%s) = %d; want %d", tc.path, got, tc.want)
		}
	}
	if os.Geteuid() != 0 {
		os.MkdirAll(root+"/ro", 0o555)
		if got := pathFault(root + "/ro/x"); got != exitPathNotWritable {
			t.Errorf("pathFault in a 0555 directory = %d; want %d", got, exitPathNotWritable)
		}
	}
}
