package dockerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Image is the engine's image inspect answer (the fields Stockade uses).
type Image struct {
	ID          string   `json:"Id"`
	RepoTags    []string `json:"RepoTags"`
	RepoDigests []string `json:"RepoDigests"`
	Created     string   `json:"Created"`
	Size        int64    `json:"Size"` // bytes
	Os          string   `json:"Os"`
	Arch        string   `json:"Architecture"`
	Config      struct {
		Labels     map[string]string `json:"Labels"`
		Env        []string          `json:"Env"`
		User       string            `json:"User"`
		WorkingDir string            `json:"WorkingDir"`
	} `json:"Config"`
}

// ImageInspect returns the image named by ref (an ID, name:tag or
// name@digest); an absent image matches ErrNotFound.
func (c *Client) ImageInspect(ctx context.Context, ref string) (Image, error) {
	var v Image
	p, err := imagePath(ref)
	if err != nil {
		return v, err
	}
	err = c.call(ctx, request{method: http.MethodGet, path: p + "/json"}, nil, &v)
	return v, err
}

// ErrInvalidRef reports an image reference that cannot name an image: it
// is empty, or one of its "/"-separated parts is empty, "." or "..".
var ErrInvalidRef = errors.New("dockerapi: invalid image reference")

// imagePath is the route of image ref, "/images/" and ref's parts each
// escaped: a reference cannot reach another route, add a query or cut the
// path. Its slashes stay (the engine's image routes take a name with
// them).
func imagePath(ref string) (string, error) {
	parts := strings.Split(ref, "/")
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", fmt.Errorf("%w: %q", ErrInvalidRef, ref)
		}
		parts[i] = pathEscape(p)
	}
	return "/images/" + strings.Join(parts, "/"), nil
}

// ImageSummary is one entry of an image list.
type ImageSummary struct {
	ID          string            `json:"Id"`
	RepoTags    []string          `json:"RepoTags"`
	RepoDigests []string          `json:"RepoDigests"`
	Created     int64             `json:"Created"` // Unix seconds
	Size        int64             `json:"Size"`    // bytes
	Labels      map[string]string `json:"Labels"`
}

// ImageList lists images matching filters (for example LabelFilter).
func (c *Client) ImageList(ctx context.Context, filters Filters) ([]ImageSummary, error) {
	q := url.Values{}
	if err := filters.encode(q); err != nil {
		return nil, err
	}
	var v []ImageSummary
	err := c.call(ctx, request{method: http.MethodGet, path: "/images/json", query: q}, nil, &v)
	return v, err
}

// ImageRemove removes the image ref. It never prunes untagged parents of
// images it did not name.
func (c *Client) ImageRemove(ctx context.Context, ref string, force bool) error {
	q := url.Values{"noprune": {"1"}}
	if force {
		q.Set("force", "1")
	}
	p, err := imagePath(ref)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p, query: q}, nil, nil)
}

// ImagePull pulls ref (name:tag or name@digest) and waits for the pull to
// finish. A failure the engine reports inside the progress stream is a
// *StreamError.
func (c *Client) ImagePull(ctx context.Context, ref string) error {
	name, tag := splitRef(ref)
	q := url.Values{"fromImage": {name}}
	if tag != "" {
		q.Set("tag", tag)
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/images/create", query: q})
	if err != nil {
		return err
	}
	defer drainClose(resp.Body)
	_, err = readProgress(ctx, "pull "+ref, resp.Body)
	return err
}

// splitRef splits name:tag or name@digest; the digest form keeps the whole
// ref as the name.
func splitRef(ref string) (name, tag string) {
	if strings.Contains(ref, "@") {
		i := strings.LastIndex(ref, "@")
		return ref[:i], ref[i+1:]
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

// LoadResult says what an image load brought in.
type LoadResult struct {
	IDs  []string // "sha256:…" of images loaded without a tag
	Tags []string // name:tag of images loaded with one
}

// ImageLoad loads a docker-archive tar (manifest.json, config, layers) from
// r. The body is streamed, never held in memory.
func (c *Client) ImageLoad(ctx context.Context, r io.Reader) (LoadResult, error) {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/images/load", body: r, ctype: "application/x-tar", query: url.Values{"quiet": {"1"}}})
	if err != nil {
		return LoadResult{}, err
	}
	defer drainClose(resp.Body)
	lines, err := readProgress(ctx, "load", resp.Body)
	var res LoadResult
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "Loaded image ID: "); ok {
			res.IDs = append(res.IDs, v)
		} else if v, ok := strings.CutPrefix(l, "Loaded image: "); ok {
			res.Tags = append(res.Tags, v)
		}
	}
	return res, err
}

// readProgress reads a JSON progress stream (pull, load) to its end,
// returning the "stream" texts and the first error the engine reported.
func readProgress(ctx context.Context, op string, r io.Reader) ([]string, error) {
	dec := json.NewDecoder(r)
	var streams []string
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return streams, nil
			}
			if ctx.Err() != nil {
				return streams, ctx.Err()
			}
			return streams, fmt.Errorf("dockerapi: %s: read progress: %w", op, err)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			msg := m.ErrorDetail.Message
			if msg == "" {
				msg = m.Error
			}
			return streams, &StreamError{Op: op, Message: msg}
		}
		if m.Stream != "" && len(streams) < 1000 {
			streams = append(streams, m.Stream)
		}
	}
}

// ImageTag gives the image ref the name repo:tag.
func (c *Client) ImageTag(ctx context.Context, ref, repo, tag string) error {
	q := url.Values{"repo": {repo}, "tag": {tag}}
	p, err := imagePath(ref)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: p + "/tag", query: q, ok: []int{http.StatusCreated, http.StatusOK}}, nil, nil)
}
