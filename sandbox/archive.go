package sandbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// ErrBadArchive reports an archive a sandbox handed over that breaks the
// shape Provider.Export promises: a member named outside the export's top
// directory (absolute, "..", unclean), a device, FIFO or other special
// member, a hard link to anything but an earlier regular file, a member
// below an earlier symlink or file, a name given twice, or data that does
// not match its header's size. In a backend whose archive is written by a
// process of the session's user (tar(1) under Kubernetes), the session can
// write into that process's output: this is what such a forgery gets.
var ErrBadArchive = errors.New("sandbox: malformed archive from the sandbox")

// CheckArchive returns the archive r holds, re-encoded member by member,
// each checked before any of it is passed on: what Export hands a caller.
// Every member must be named base or below it (relative and clean, as
// path.Clean leaves it, a directory's name with or without its trailing
// slash), be a regular file, a directory, a symlink (to any target: it is
// archived, never followed) or a hard link to an earlier regular file, lie
// below no earlier symlink or non-directory, and appear once; a regular
// file's data must be exactly its size. Set-user-ID and set-group-ID bits,
// extended attributes and other PAX records are dropped: nothing a
// platform extracts from a sandbox gains privileges. The first violation
// ends the stream with an error wrapping ErrBadArchive, the offending
// member unwritten; an archive that ends early is an error too. Closing
// the result closes r when r is an io.Closer.
func CheckArchive(r io.Reader, base string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(copyArchive(tar.NewWriter(pw), tar.NewReader(r), base))
	}()
	c := &checkedArchive{PipeReader: pr}
	if rc, ok := r.(io.Closer); ok {
		c.src = rc
	}
	return c
}

// checkedArchive is CheckArchive's reader: closing it ends the copy and
// closes the source.
type checkedArchive struct {
	*io.PipeReader
	src io.Closer
}

func (c *checkedArchive) Close() error {
	err := c.PipeReader.Close()
	if c.src != nil {
		if cerr := c.src.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Bounds of CheckArchive.
const (
	// maxArchiveName bounds a member's name and a link's target, in bytes
	// (Linux's PATH_MAX).
	maxArchiveName = 4096
)

// copyArchive copies tr to tw, checking each member (see CheckArchive).
func copyArchive(tw *tar.Writer, tr *tar.Reader, base string) error {
	if base == "" || base == "." || base == ".." || strings.ContainsAny(base, "/\x00") {
		return fmt.Errorf("%w: export base %q is not one path component", ErrBadArchive, base)
	}
	bad := func(h *tar.Header, why string) error {
		return fmt.Errorf("%w: member %q: %s", ErrBadArchive, h.Name, why)
	}
	kinds := map[string]byte{} // names seen, by type
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			if n == 0 {
				return fmt.Errorf("%w: the archive is empty", ErrBadArchive)
			}
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadArchive, err)
		}
		name, why := memberName(h.Name, base)
		if why != "" {
			return bad(h, why)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
		default:
			return bad(h, fmt.Sprintf("type %q: only files, directories and links are exported", h.Typeflag))
		}
		if h.Typeflag != tar.TypeReg && h.Size != 0 {
			return bad(h, fmt.Sprintf("a %s with %d bytes of data", kindName(h.Typeflag), h.Size))
		}
		if _, dup := kinds[name]; dup {
			return bad(h, "named twice")
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if k, ok := kinds[d]; ok && k != tar.TypeDir {
				return bad(h, "below "+d+", which is a "+kindName(k))
			}
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			if h.Linkname == "" || len(h.Linkname) > maxArchiveName || strings.IndexByte(h.Linkname, 0) >= 0 {
				return bad(h, "a symlink without a proper target")
			}
		case tar.TypeLink:
			target, why := memberName(h.Linkname, base)
			if why != "" {
				return bad(h, "a hard link to "+h.Linkname+": "+why)
			}
			if kinds[target] != tar.TypeReg {
				return bad(h, "a hard link to "+h.Linkname+", which is no earlier regular file")
			}
			h.Linkname = target
		}
		kinds[name] = h.Typeflag
		if h.Typeflag == tar.TypeDir {
			name += "/"
		}
		out := &tar.Header{Typeflag: h.Typeflag, Name: name, Linkname: h.Linkname, Size: h.Size,
			Mode: h.Mode &^ 0o6000, Uid: h.Uid, Gid: h.Gid, Uname: h.Uname, Gname: h.Gname, ModTime: h.ModTime}
		if err := tw.WriteHeader(out); err != nil {
			return bad(h, err.Error())
		}
		if h.Typeflag == tar.TypeReg {
			if n, err := io.Copy(tw, tr); err != nil || n != h.Size {
				return bad(h, fmt.Sprintf("%d of its %d bytes came (%v)", n, h.Size, err))
			}
		}
	}
}

// memberName returns a member's name n checked against base: relative,
// clean, at most maxArchiveName bytes without NUL, and base or below it
// (a trailing slash dropped); why says what is wrong, else "".
func memberName(n, base string) (name, why string) {
	name = strings.TrimSuffix(n, "/")
	switch {
	case name == "" || len(name) > maxArchiveName || strings.IndexByte(name, 0) >= 0:
		return "", "not a proper name"
	case strings.HasPrefix(name, "/"):
		return "", "an absolute name"
	case path.Clean(name) != name:
		return "", "not a clean name"
	case name != base && !strings.HasPrefix(name, base+"/"):
		return "", "outside " + base
	}
	return name, ""
}

func kindName(t byte) string {
	switch t {
	case tar.TypeReg:
		return "regular file"
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	}
	return fmt.Sprintf("member of type %q", t)
}
