package docker

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// exportShape turns the engine's archive of root, with st the stat that
// came with it, into what Export promises on every engine: one top-level
// member named path.Base(root) and everything else under it, and a root
// that is a symlink archived as that link alone. The engines differ:
//
//   - Podman 4 names the top-level member of a stopped container's volume
//     "/" (members "/", "/p", …), where Docker names it "workspace";
//   - Podman follows a root that is a symlink and archives what it points
//     to, where Docker archives the link.
//
// So the archive is re-encoded, members renamed under the base name when
// the engine named the top "/" or ".", and an archive with any other
// member outside the base is refused. A symlink root becomes a one-member
// archive built here from st (whose target, on both engines, is the
// link's resolution inside the sandbox, an absolute path), and the
// engine's archive is not read: on Podman it holds the link's target.
func exportShape(rc io.ReadCloser, st dockerapi.PathStat, root string) (io.ReadCloser, error) {
	base := path.Base(root)
	if st.Mode&os.ModeSymlink != 0 {
		rc.Close()
		return linkArchive(base, st), nil
	}
	pr, pw := io.Pipe()
	go func() {
		err := renameMembers(tar.NewReader(rc), tar.NewWriter(pw), base)
		rc.Close()
		pw.CloseWithError(err)
	}()
	return &readCloser{Reader: pr, c: closers{pr, rc}}, nil
}

// renameMembers copies tr to tw, naming every member under base: the
// first member says how the engine named the top.
func renameMembers(tr *tar.Reader, tw *tar.Writer, base string) error {
	var rename func(string) (string, bool)
	for first := true; ; first = false {
		h, err := tr.Next()
		if err == io.EOF {
			if first {
				return fmt.Errorf("docker: export: the engine's archive is empty")
			}
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("docker: export: %w", err)
		}
		if first {
			rename = renamer(h.Name, base)
		}
		name, ok := rename(h.Name)
		if !ok {
			return fmt.Errorf("docker: export: the engine's archive has member %q outside %q; refusing it", h.Name, base)
		}
		h.Name = name
		if h.Typeflag == tar.TypeLink {
			if h.Linkname, ok = rename(h.Linkname); !ok {
				return fmt.Errorf("docker: export: the engine's archive has a hard link to %q outside %q; refusing it", h.Linkname, base)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("docker: export: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("docker: export: %w", err)
		}
	}
}

// renamer returns how to name members given the engine's name of the top
// one: kept when it is base (Docker), moved under base when it is the
// archive's own root (Podman's "/"). ok is false for a member outside.
func renamer(top, base string) func(string) (string, bool) {
	switch strings.TrimSuffix(top, "/") {
	case base:
		return func(n string) (string, bool) {
			return n, strings.TrimSuffix(n, "/") == base || strings.HasPrefix(n, base+"/")
		}
	case "", ".":
		return func(n string) (string, bool) {
			rest := strings.TrimPrefix(strings.TrimPrefix(n, "."), "/")
			if rest == "" {
				return base + "/", true
			}
			if c := path.Clean(rest); c != strings.TrimSuffix(rest, "/") || c == ".." || strings.HasPrefix(c, "../") {
				return n, false
			}
			return base + "/" + rest, true
		}
	}
	return func(n string) (string, bool) { return n, false }
}

// linkArchive is a tar holding one member: the symlink base, to st's
// target.
func linkArchive(base string, st dockerapi.PathStat) io.ReadCloser {
	mtime, _ := time.Parse(time.RFC3339Nano, st.Mtime)
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: base, Linkname: st.LinkTarget, Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// closers closes each in order and returns the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
