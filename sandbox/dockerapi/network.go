package dockerapi

import (
	"context"
	"net/http"
	"net/url"
)

// NetworkCreate is the body of POST /networks/create.
type NetworkCreate struct {
	Name     string            `json:"Name"`
	Driver   string            `json:"Driver,omitempty"` // "bridge" if empty
	Internal bool              `json:"Internal,omitempty"`
	Labels   map[string]string `json:"Labels,omitempty"`
	Options  map[string]string `json:"Options,omitempty"`
	// IPAM chooses the network's addresses; nil lets the engine take a
	// subnet from its default pools (which run out after about 30
	// networks). An overlapping subnet matches ErrForbidden.
	IPAM *IPAM `json:"IPAM,omitempty"`
	// CheckDuplicate refuses a second network with the same name (ErrConflict).
	CheckDuplicate bool `json:"CheckDuplicate"`
}

// IPAM is a network's address management.
type IPAM struct {
	Driver string       `json:"Driver,omitempty"` // "default" if empty
	Config []IPAMConfig `json:"Config"`
}

// IPAMConfig is one address range of a network.
type IPAMConfig struct {
	Subnet  string `json:"Subnet,omitempty"`  // CIDR, such as "10.213.4.0/24"
	Gateway string `json:"Gateway,omitempty"` // the host's address on it
}

// Network is one entry of a network list.
type Network struct {
	ID       string            `json:"Id"`
	Name     string            `json:"Name"`
	Driver   string            `json:"Driver"`
	Internal bool              `json:"Internal"`
	Labels   map[string]string `json:"Labels"`
	Options  map[string]string `json:"Options"`
	IPAM     IPAM              `json:"IPAM"`
}

// NetworkCreate creates a network and returns its ID.
func (c *Client) NetworkCreate(ctx context.Context, n NetworkCreate) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := c.call(ctx, request{method: http.MethodPost, path: "/networks/create"}, n, &out)
	return out.ID, err
}

// NetworkRemove removes a network; a missing one matches ErrNotFound, one
// containers still use ErrForbidden.
func (c *Client) NetworkRemove(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/networks/" + pathEscape(id)}, nil, nil)
}

// NetworkConnect attaches a container to a network.
func (c *Client) NetworkConnect(ctx context.Context, network, container string, aliases ...string) error {
	body := struct {
		Container      string            `json:"Container"`
		EndpointConfig *EndpointSettings `json:"EndpointConfig,omitempty"`
	}{Container: container}
	if len(aliases) > 0 {
		body.EndpointConfig = &EndpointSettings{Aliases: aliases}
	}
	return c.call(ctx, request{method: http.MethodPost, path: "/networks/" + pathEscape(network) + "/connect"}, body, nil)
}

// NetworkDisconnect detaches a container from a network.
func (c *Client) NetworkDisconnect(ctx context.Context, network, container string, force bool) error {
	body := struct {
		Container string `json:"Container"`
		Force     bool   `json:"Force"`
	}{container, force}
	return c.call(ctx, request{method: http.MethodPost, path: "/networks/" + pathEscape(network) + "/disconnect"}, body, nil)
}

// NetworkList lists networks matching filters.
func (c *Client) NetworkList(ctx context.Context, filters Filters) ([]Network, error) {
	q := url.Values{}
	if err := filters.encode(q); err != nil {
		return nil, err
	}
	var v []Network
	err := c.call(ctx, request{method: http.MethodGet, path: "/networks", query: q}, nil, &v)
	return v, err
}
