package dockerapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// PathStat describes a path in a container, from the
// X-Docker-Container-Path-Stat header of archive calls.
type PathStat struct {
	Name       string      `json:"name"`
	Size       int64       `json:"size"` // bytes
	Mode       os.FileMode `json:"mode"` // Go's FileMode bits, as the engine encodes them
	Mtime      string      `json:"mtime"`
	LinkTarget string      `json:"linkTarget"`
}

func jsonReader(s string) io.Reader { return strings.NewReader(s) }

func parseStat(h http.Header) (PathStat, error) {
	var st PathStat
	v := h.Get("X-Docker-Container-Path-Stat")
	if v == "" {
		return st, fmt.Errorf("dockerapi: archive answer has no path stat")
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return st, fmt.Errorf("dockerapi: archive path stat: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("dockerapi: archive path stat: %w", err)
	}
	return st, nil
}

// ArchiveStat stats path in the container (HEAD /containers/{id}/archive). A
// missing path or container matches ErrNotFound. It works on stopped
// containers. Like every archive call it sees the image's layers and the
// volumes and binds, but not a tmpfs: a path under a tmpfs is ErrNotFound (or
// the directory the tmpfs hides).
func (c *Client) ArchiveStat(ctx context.Context, id, path string) (PathStat, error) {
	resp, err := c.send(ctx, request{method: http.MethodHead, path: "/containers/" + pathEscape(id) + "/archive", query: url.Values{"path": {path}}})
	if err != nil {
		return PathStat{}, err
	}
	drainClose(resp.Body)
	return parseStat(resp.Header)
}

// ArchiveGet returns a tar of path (a file, or a directory and everything
// under it, as one top-level member named after path's base name) and the
// path's stat. The caller closes the reader and bounds what it reads.
func (c *Client) ArchiveGet(ctx context.Context, id, path string) (io.ReadCloser, PathStat, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + pathEscape(id) + "/archive", query: url.Values{"path": {path}}})
	if err != nil {
		return nil, PathStat{}, err
	}
	st, err := parseStat(resp.Header)
	if err != nil {
		resp.Body.Close()
		return nil, PathStat{}, err
	}
	return resp.Body, st, nil
}

// PutOptions are the options of ArchivePut.
type PutOptions struct {
	// NoOverwriteDirNonDir refuses to replace a directory with a non-directory
	// or the reverse.
	NoOverwriteDirNonDir bool
	// CopyUIDGID makes extracted files owned by the container's user rather
	// than by the tar headers' ids. The engine looks the user up in the
	// container's /etc/passwd; Engine 20.10 fails (500) on a numeric one.
	CopyUIDGID bool
}

// ArchivePut extracts the tar read from r into the directory dir of the
// container. The engine extracts as root; a missing dir matches ErrNotFound,
// a read-only root fails with an *Error (500 from Engine 20.10), and the
// extraction is not atomic.
func (c *Client) ArchivePut(ctx context.Context, id, dir string, r io.Reader, opts PutOptions) error {
	q := url.Values{"path": {dir}}
	if opts.NoOverwriteDirNonDir {
		q.Set("noOverwriteDirNonDir", "1")
	}
	if opts.CopyUIDGID {
		q.Set("copyUIDGID", "1")
	}
	return c.call(ctx, request{method: http.MethodPut, path: "/containers/" + pathEscape(id) + "/archive", query: q, body: r, ctype: "application/x-tar"}, nil, nil)
}
