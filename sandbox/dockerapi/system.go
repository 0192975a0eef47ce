package dockerapi

import (
	"context"
	"net/http"
)

// Ping checks that the engine answers and negotiates the API version.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.APIVersion(ctx)
	return err
}

// Version is the engine's GET /version answer (the fields Stockade uses).
type Version struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	Os            string `json:"Os"`
	Arch          string `json:"Arch"`
	KernelVersion string `json:"KernelVersion"`
	// Components name the engine's parts: Docker's "Engine", Podman's
	// "Podman Engine", and their runtimes.
	Components []Component `json:"Components"`
}

// Component is one part of the engine, as Version lists it.
type Component struct {
	Name    string `json:"Name"`
	Version string `json:"Version"`
}

// Podman reports whether the engine is Podman (its compatibility API),
// by the component it lists. Stockade decides nothing by it: where Podman
// behaves otherwise, the backend checks the behaviour itself; tests use
// it to know which behaviour to expect.
func (v Version) Podman() bool {
	for _, c := range v.Components {
		if c.Name == "Podman Engine" {
			return true
		}
	}
	return false
}

// Version returns the engine's version.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.call(ctx, request{method: http.MethodGet, path: "/version"}, nil, &v)
	return v, err
}

// Info is the engine's GET /info answer (the fields Stockade uses).
type Info struct {
	ID              string   `json:"ID"`
	Name            string   `json:"Name"`
	NCPU            int      `json:"NCPU"`
	MemTotal        int64    `json:"MemTotal"` // bytes
	OperatingSystem string   `json:"OperatingSystem"`
	OSType          string   `json:"OSType"`
	Architecture    string   `json:"Architecture"`
	ServerVersion   string   `json:"ServerVersion"`
	Driver          string   `json:"Driver"`
	CgroupDriver    string   `json:"CgroupDriver"`
	CgroupVersion   string   `json:"CgroupVersion"`
	SecurityOptions []string `json:"SecurityOptions"`
	PidsLimit       bool     `json:"PidsLimit"`
	MemoryLimit     bool     `json:"MemoryLimit"`
	SwapLimit       bool     `json:"SwapLimit"`
	KernelVersion   string   `json:"KernelVersion"`
	// Runtimes are the OCI runtimes the engine can start containers with,
	// by name (HostConfig.Runtime); DefaultRuntime is the one a container
	// that names none gets.
	Runtimes       map[string]RuntimeInfo `json:"Runtimes"`
	DefaultRuntime string                 `json:"DefaultRuntime"`
}

// RuntimeInfo is one of Info's Runtimes.
type RuntimeInfo struct {
	Path string   `json:"path"` // the runtime's binary
	Args []string `json:"runtimeArgs,omitempty"`
}

// Info returns system-wide information.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var v Info
	err := c.call(ctx, request{method: http.MethodGet, path: "/info"}, nil, &v)
	return v, err
}
