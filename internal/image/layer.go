package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"time"
)

// epoch is the one time written anywhere in an image: file times in the
// layers and "created" in the config. A fixed value is what makes two builds
// from the same inputs byte-identical.
var epoch = time.Unix(0, 0).UTC()

// entry is one file, directory or symlink of a layer. Regular files carry
// their content either inline (data) or as a host path (src) read when the
// layer is written; size is fixed when the entry is planned, so a file that
// changes between the hashing pass and the upload is caught.
type entry struct {
	name string // path inside the image, no leading slash; directories end in "/"
	typ  byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode int64  // permission bits plus sticky; owner is always 0:0
	size int64  // bytes, regular files only
	link string // symlink target
	src  string // host file to copy, or "" to use data
	data []byte
}

// layer is a planned layer: its entries in write order, and, once hashed,
// the sha256 of its uncompressed tar (the diff ID) and the tar's length.
type layer struct {
	what    string // for history and errors: "base" or "go"
	entries []entry
	diffID  string // "sha256:<hex>"
	size    int64  // bytes of the layer tar
}

// header returns e's tar header: root-owned, epoch times, no user names,
// so nothing from the host but content and the normalised mode leaks in.
func (e *entry) header() *tar.Header {
	h := &tar.Header{
		Typeflag: e.typ,
		Name:     e.name,
		Linkname: e.link,
		Mode:     e.mode,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
	if e.typ == tar.TypeReg {
		h.Size = e.size
	}
	return h
}

// write writes the layer tar to w. It checks ctx between entries, so a
// cancelled build stops within one file.
func (l *layer) write(ctx context.Context, w io.Writer) error {
	tw := tar.NewWriter(w)
	for i := range l.entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := &l.entries[i]
		if err := tw.WriteHeader(e.header()); err != nil {
			return fmt.Errorf("%s layer: %s: %w", l.what, e.name, err)
		}
		if e.typ != tar.TypeReg {
			continue
		}
		if e.src == "" {
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("%s layer: %s: %w", l.what, e.name, err)
			}
			continue
		}
		if err := copyFile(tw, e.src, e.size); err != nil {
			return fmt.Errorf("%s layer: %w", l.what, err)
		}
	}
	return tw.Close()
}

// copyFile copies exactly size bytes of the host file src to w.
func copyFile(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(w, f, size)
	if err == io.EOF {
		return fmt.Errorf("%s: changed while building: %d bytes, planned %d", src, n, size)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

// hash writes the layer once to compute its diff ID and size; nothing is
// kept but the digest.
func (l *layer) hash(ctx context.Context) error {
	h := sha256.New()
	cw := &countWriter{w: h}
	if err := l.write(ctx, cw); err != nil {
		return err
	}
	l.diffID = digest(h)
	l.size = cw.n
	return nil
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
