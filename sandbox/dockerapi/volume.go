package dockerapi

import (
	"context"
	"net/http"
	"net/url"
)

// VolumeCreate is the body of POST /volumes/create.
type VolumeCreate struct {
	Name       string            `json:"Name,omitempty"`
	Driver     string            `json:"Driver,omitempty"`
	DriverOpts map[string]string `json:"DriverOpts,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// Volume is a volume as the engine describes it.
type Volume struct {
	Name       string            `json:"Name"`
	Driver     string            `json:"Driver"`
	Mountpoint string            `json:"Mountpoint"`
	Labels     map[string]string `json:"Labels"`
	Options    map[string]string `json:"Options"` // the driver options it was created with
	CreatedAt  string            `json:"CreatedAt"`
}

// VolumeCreate creates a volume (creating an existing name returns it).
func (c *Client) VolumeCreate(ctx context.Context, v VolumeCreate) (Volume, error) {
	var out Volume
	err := c.call(ctx, request{method: http.MethodPost, path: "/volumes/create"}, v, &out)
	return out, err
}

// VolumeRemove removes a volume; in use matches ErrConflict, missing
// ErrNotFound.
func (c *Client) VolumeRemove(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "1")
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/volumes/" + pathEscape(name), query: q}, nil, nil)
}

// VolumeList lists volumes matching filters.
func (c *Client) VolumeList(ctx context.Context, filters Filters) ([]Volume, error) {
	q := url.Values{}
	if err := filters.encode(q); err != nil {
		return nil, err
	}
	var out struct {
		Volumes []Volume `json:"Volumes"`
	}
	err := c.call(ctx, request{method: http.MethodGet, path: "/volumes", query: q}, nil, &out)
	return out.Volumes, err
}
