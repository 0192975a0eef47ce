package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// member is one entry of a test archive.
type member struct {
	typ  byte
	name string
	body string // a regular file's data; a link's target
	mode int64
	size int64 // the header's size when not len(body); -1: len(body)
}

func reg(name, body string) member       { return member{tar.TypeReg, name, body, 0o644, -1} }
func dir(name string) member             { return member{tar.TypeDir, name, "", 0o755, -1} }
func symlink(name, target string) member { return member{tar.TypeSymlink, name, target, 0o777, -1} }
func hardlink(name, target string) member {
	return member{tar.TypeLink, name, target, 0o644, -1}
}

// archive writes ms as a tar; cut drops that many bytes from its end.
func archive(t *testing.T, cut int, ms ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Typeflag: m.typ, Name: m.name, Mode: m.mode, Format: tar.FormatPAX}
		data := ""
		switch m.typ {
		case tar.TypeSymlink, tar.TypeLink:
			h.Linkname = m.body
		case tar.TypeReg:
			data = m.body
			h.Size = int64(len(data))
		}
		if m.size >= 0 {
			h.Size = m.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if data != "" {
			tw.Write([]byte(data))
		}
	}
	tw.Flush()
	if cut == 0 {
		tw.Close()
	}
	out := b.Bytes()
	return out[:len(out)-cut]
}

// readChecked reads CheckArchive's output of a whole: its members (name ->
// type and data) and its error.
func readChecked(in []byte, base string) (map[string]string, error) {
	rc := CheckArchive(bytes.NewReader(in), base)
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return got, err
		}
		got[h.Name] = string(h.Typeflag) + string(b) + h.Linkname
	}
}

func TestCheckArchive(t *testing.T) {
	good := []member{dir("ex/"), reg("ex/a", "one"), dir("ex/sub"), reg("ex/sub/b", "two"),
		symlink("ex/pw", "/etc/passwd"), symlink("ex/up", ".."), hardlink("ex/h", "ex/a")}
	got, err := readChecked(archive(t, 0, good...), "ex")
	if err != nil {
		t.Fatalf("a good archive: %v", err)
	}
	for name, want := range map[string]string{"ex/": "5", "ex/a": "0one", "ex/sub/": "5", "ex/sub/b": "0two", "ex/pw": "2/etc/passwd", "ex/up": "2..", "ex/h": "1ex/a"} {
		if got[name] != want {
			t.Errorf("member %s = %q; want %q (all: %q)", name, got[name], want, got)
		}
	}
	if got, err := readChecked(archive(t, 0, symlink("exlink", "/etc")), "exlink"); err != nil || got["exlink"] != "2/etc" {
		t.Errorf("a symlink root = %q, %v; want the link alone", got, err)
	}

	for _, tc := range []struct {
		name string
		ms   []member
		cut  int
	}{
		{"dot-dot", []member{dir("ex/"), reg("ex/../evil", "x")}, 0},
		{"parent", []member{reg("../evil", "x")}, 0},
		{"absolute", []member{dir("ex/"), reg("/etc/evil", "x")}, 0},
		{"outside the base", []member{dir("ex/"), reg("other/x", "x")}, 0},
		{"base prefix", []member{reg("exx", "x")}, 0},
		{"unclean", []member{dir("ex/"), reg("ex/./a", "x")}, 0},
		{"double slash", []member{dir("ex/"), reg("ex//a", "x")}, 0},
		{"char device", []member{dir("ex/"), {tar.TypeChar, "ex/tty", "", 0o666, -1}}, 0},
		{"block device", []member{dir("ex/"), {tar.TypeBlock, "ex/sda", "", 0o666, -1}}, 0},
		{"fifo", []member{dir("ex/"), {tar.TypeFifo, "ex/p", "", 0o666, -1}}, 0},
		{"hard link outside", []member{dir("ex/"), hardlink("ex/h", "etc/passwd")}, 0},
		{"hard link absolute", []member{dir("ex/"), hardlink("ex/h", "/etc/passwd")}, 0},
		{"hard link forward", []member{dir("ex/"), hardlink("ex/h", "ex/a"), reg("ex/a", "x")}, 0},
		{"hard link to a dir", []member{dir("ex/"), dir("ex/d"), hardlink("ex/h", "ex/d")}, 0},
		{"through a symlink", []member{dir("ex/"), symlink("ex/l", "/etc"), reg("ex/l/passwd", "x")}, 0},
		{"below a file", []member{dir("ex/"), reg("ex/f", "x"), reg("ex/f/g", "y")}, 0},
		{"twice", []member{dir("ex/"), reg("ex/a", "x"), symlink("ex/a", "/etc")}, 0},
		{"dir twice", []member{dir("ex/"), dir("ex")}, 0},
		{"dir with data", []member{dir("ex/"), {tar.TypeDir, "ex/d", "", 0o755, 10}}, 0},
		{"empty", nil, 0},
		{"cut short", []member{dir("ex/"), reg("ex/a", strings.Repeat("x", 2000))}, 1500},
	} {
		_, err := readChecked(archive(t, tc.cut, tc.ms...), "ex")
		if !errors.Is(err, ErrBadArchive) {
			t.Errorf("%s: CheckArchive = %v; want ErrBadArchive", tc.name, err)
		}
	}
	// Garbage is no archive.
	if _, err := readChecked([]byte(strings.Repeat("garbage!", 200)), "ex"); !errors.Is(err, ErrBadArchive) {
		t.Errorf("garbage: CheckArchive = %v; want ErrBadArchive", err)
	}
}

// TestCheckArchiveDropsPrivileges: set-ID bits and extended attributes
// never come out of a sandbox.
func TestCheckArchiveDropsPrivileges(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "ex/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ex/su", Mode: 0o6755, Uid: 0, Size: 1, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02", "SCHILY.xattr.user.x": "y"}})
	tw.Write([]byte("x"))
	tw.Close()
	rc := CheckArchive(&b, "ex")
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode&0o6000 != 0 || len(h.PAXRecords) != 0 {
			t.Errorf("member %s: mode %o, PAX records %q; want no set-ID bits and no records", h.Name, h.Mode, h.PAXRecords)
		}
	}
}
