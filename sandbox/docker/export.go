package docker

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// exportShape turns the engine's archive of root, with st the stat that
// came with it, into what Export promises on every engine: one top-level
// member named path.Base(root) and everything else under it, and a root
// that is a symlink archived as that link alone, checked member by member
// (sandbox.CheckArchive: a member outside, a device, a hard link out is
// sandbox.ErrBadArchive). The engines differ:
//
//   - Podman 4 names the top-level member of a stopped container's volume
//     "/" (members "/", "/p", …), where Docker names it "workspace";
//   - Podman follows a root that is a symlink and archives what it points
//     to, where Docker archives the link.
//
// So members are renamed under the base name when the engine named the
// top "/" or "."; the check then refuses any other name outside it. A
// symlink root becomes a one-member archive built here from st (whose
// target, on both engines, is the link's resolution inside the sandbox, an
// absolute path), and the engine's archive is not read: on Podman it holds
// the link's target.
func exportShape(rc io.ReadCloser, st dockerapi.PathStat, root string) (io.ReadCloser, error) {
	base := path.Base(root)
	if st.Mode&os.ModeSymlink != 0 {
		rc.Close()
		return sandbox.CheckArchive(linkArchive(base, st), base), nil
	}
	pr, pw := io.Pipe()
	go func() {
		err := renameMembers(tar.NewReader(rc), tar.NewWriter(pw), base)
		rc.Close()
		pw.CloseWithError(err)
	}()
	return sandbox.CheckArchive(&readCloser{Reader: pr, c: closers{pr, rc}}, base), nil
}

// renameMembers copies tr to tw, naming every member (and hard link
// target) under base when the first member says the engine named the top
// "/" or "."; other names pass unchanged, for the check to judge.
func renameMembers(tr *tar.Reader, tw *tar.Writer, base string) error {
	slashTop := false
	for first := true; ; first = false {
		h, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("docker: export: %w", err)
		}
		if first {
			top := strings.TrimSuffix(h.Name, "/")
			slashTop = top == "" || top == "."
		}
		if slashTop {
			h.Name = underBase(h.Name, base)
			if h.Typeflag == tar.TypeLink {
				h.Linkname = underBase(h.Linkname, base)
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

// underBase names n, a member of an archive whose top is "/" or ".", under
// base: "/" is base itself, "/p" and "./p" are base/p.
func underBase(n, base string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(n, "."), "/")
	if rest == "" {
		return base + "/"
	}
	return base + "/" + rest
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
