package dockerapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ContainerConfig is the body of POST /containers/create: the container's
// own settings, its HostConfig and its NetworkingConfig. Zero fields are
// left out, so the engine's defaults apply to them.
type ContainerConfig struct {
	Image            string              `json:"Image"`
	Cmd              []string            `json:"Cmd,omitempty"`
	Entrypoint       []string            `json:"Entrypoint,omitempty"`
	Env              []string            `json:"Env"` // KEY=value; the engine adds the image's Env to these
	User             string              `json:"User,omitempty"`
	WorkingDir       string              `json:"WorkingDir,omitempty"`
	Labels           map[string]string   `json:"Labels,omitempty"`
	Hostname         string              `json:"Hostname,omitempty"`
	NetworkDisabled  bool                `json:"NetworkDisabled,omitempty"`
	StopSignal       string              `json:"StopSignal,omitempty"`
	StopTimeout      *int                `json:"StopTimeout,omitempty"` // seconds
	Tty              bool                `json:"Tty,omitempty"`
	OpenStdin        bool                `json:"OpenStdin,omitempty"`
	AttachStdout     bool                `json:"AttachStdout,omitempty"`
	AttachStderr     bool                `json:"AttachStderr,omitempty"`
	Volumes          map[string]struct{} `json:"Volumes,omitempty"`
	HostConfig       HostConfig          `json:"HostConfig"`
	NetworkingConfig *NetworkingConfig   `json:"NetworkingConfig,omitempty"`
}

// HostConfig holds the settings that confine a container.
type HostConfig struct {
	Binds          []string          `json:"Binds,omitempty"` // "src:dst[:ro]"
	Mounts         []Mount           `json:"Mounts,omitempty"`
	Tmpfs          map[string]string `json:"Tmpfs,omitempty"` // path → mount options
	ReadonlyRootfs bool              `json:"ReadonlyRootfs"`
	NetworkMode    string            `json:"NetworkMode,omitempty"` // "none", "bridge", or a network name
	CapAdd         []string          `json:"CapAdd,omitempty"`
	CapDrop        []string          `json:"CapDrop,omitempty"`
	SecurityOpt    []string          `json:"SecurityOpt,omitempty"` // "no-new-privileges"
	Privileged     bool              `json:"Privileged"`
	Memory         int64             `json:"Memory,omitempty"`     // bytes
	MemorySwap     int64             `json:"MemorySwap,omitempty"` // bytes, memory+swap; equal to Memory means no swap
	NanoCPUs       int64             `json:"NanoCpus,omitempty"`   // 1e9 = one CPU
	PidsLimit      *int64            `json:"PidsLimit,omitempty"`
	Init           *bool             `json:"Init,omitempty"`
	AutoRemove     bool              `json:"AutoRemove,omitempty"`
	IpcMode        string            `json:"IpcMode,omitempty"`
	PidMode        string            `json:"PidMode,omitempty"`
	UsernsMode     string            `json:"UsernsMode,omitempty"`
	ShmSize        int64             `json:"ShmSize,omitempty"` // bytes
	Ulimits        []Ulimit          `json:"Ulimits,omitempty"`
	LogConfig      *LogConfig        `json:"LogConfig,omitempty"`
	ExtraHosts     []string          `json:"ExtraHosts,omitempty"`
	DNS            []string          `json:"Dns,omitempty"`
	Sysctls        map[string]string `json:"Sysctls,omitempty"` // namespaced kernel parameters, such as net.ipv6.conf.lo.disable_ipv6
	OomKillDisable *bool             `json:"OomKillDisable,omitempty"`
	RestartPolicy  *RestartPolicy    `json:"RestartPolicy,omitempty"`
	// Runtime names the OCI runtime of the container, one of Info's
	// Runtimes; "" means the engine's default (runc).
	Runtime string `json:"Runtime,omitempty"`
}

// Mount is a HostConfig mount: Type "bind", "volume" or "tmpfs".
type Mount struct {
	Type          string         `json:"Type"`
	Source        string         `json:"Source,omitempty"`
	Target        string         `json:"Target"`
	ReadOnly      bool           `json:"ReadOnly,omitempty"`
	BindOptions   *BindOptions   `json:"BindOptions,omitempty"`
	VolumeOptions *VolumeOptions `json:"VolumeOptions,omitempty"`
	TmpfsOptions  *TmpfsOptions  `json:"TmpfsOptions,omitempty"`
}

// BindOptions are options of a bind mount.
type BindOptions struct {
	Propagation  string `json:"Propagation,omitempty"`
	NonRecursive bool   `json:"NonRecursive,omitempty"`
}

// VolumeOptions are options of a volume mount.
type VolumeOptions struct {
	NoCopy bool              `json:"NoCopy,omitempty"`
	Labels map[string]string `json:"Labels,omitempty"`
}

// TmpfsOptions are options of a tmpfs mount.
type TmpfsOptions struct {
	SizeBytes int64 `json:"SizeBytes,omitempty"`
	Mode      int64 `json:"Mode,omitempty"` // permission bits, e.g. 01777
}

// Ulimit is one resource limit.
type Ulimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

// LogConfig selects the container's log driver.
type LogConfig struct {
	Type   string            `json:"Type"`
	Config map[string]string `json:"Config,omitempty"`
}

// RestartPolicy is the container's restart policy.
type RestartPolicy struct {
	Name string `json:"Name"`
}

// NetworkingConfig attaches the container to networks at create time.
type NetworkingConfig struct {
	EndpointsConfig map[string]*EndpointSettings `json:"EndpointsConfig,omitempty"`
}

// EndpointSettings configures one network attachment.
type EndpointSettings struct {
	Aliases   []string `json:"Aliases,omitempty"`
	NetworkID string   `json:"NetworkID,omitempty"`
	IPAddress string   `json:"IPAddress,omitempty"`
	// IPAMConfig asks a fixed address (on a network whose subnet was
	// given at its create); nil lets the engine choose.
	IPAMConfig *EndpointIPAMConfig `json:"IPAMConfig,omitempty"`
}

// EndpointIPAMConfig is an attachment's fixed address.
type EndpointIPAMConfig struct {
	IPv4Address string `json:"IPv4Address,omitempty"`
}

// ContainerCreate creates a container named name ("" lets the engine pick)
// and returns its ID. A name already taken matches ErrConflict.
func (c *Client) ContainerCreate(ctx context.Context, name string, cfg ContainerConfig) (string, error) {
	if cfg.Image == "" {
		// Engine 20.10 accepts it and makes a container with an empty root.
		return "", fmt.Errorf("dockerapi: create %q: no image", name)
	}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if cfg.Env == nil {
		cfg.Env = []string{}
	}
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, request{method: http.MethodPost, path: "/containers/create", query: q}, cfg, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// ContainerStart starts a container; starting a running one succeeds.
func (c *Client) ContainerStart(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/start", ok: []int{http.StatusNoContent, http.StatusNotModified}}, nil, nil)
}

// Wait conditions.
const (
	WaitNotRunning = "not-running"
	WaitNextExit   = "next-exit"
	WaitRemoved    = "removed"
)

// WaitResult is a container's exit as the wait call reports it.
type WaitResult struct {
	StatusCode int64 `json:"StatusCode"`
	Error      *struct {
		Message string `json:"Message"`
	} `json:"Error,omitempty"`
}

// ContainerWait blocks until the container meets condition (WaitNotRunning
// if empty) and returns its exit status. Cancelling ctx ends the wait, not
// the container.
func (c *Client) ContainerWait(ctx context.Context, id, condition string) (WaitResult, error) {
	if condition == "" {
		condition = WaitNotRunning
	}
	var v WaitResult
	err := c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/wait", query: url.Values{"condition": {condition}}}, nil, &v)
	if err == nil && v.Error != nil && v.Error.Message != "" {
		return v, fmt.Errorf("dockerapi: wait %s: %s", id, v.Error.Message)
	}
	return v, err
}

// ContainerKill sends signal ("" means SIGKILL) to the container's main
// process. A container that is not running matches ErrNotRunning.
func (c *Client) ContainerKill(ctx context.Context, id, signal string) error {
	q := url.Values{}
	if signal != "" {
		q.Set("signal", signal)
	}
	return c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/kill", query: q, notRunning: true}, nil, nil)
}

// ContainerStop stops a container, killing it after timeout (rounded up to
// whole seconds).
func (c *Client) ContainerStop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int((timeout + time.Second - 1) / time.Second)
	return c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/stop", query: url.Values{"t": {strconv.Itoa(secs)}}, ok: []int{http.StatusNoContent, http.StatusNotModified}}, nil, nil)
}

// ContainerRename gives container id the name name. The engine does it
// atomically: a name already taken matches ErrConflict (and nothing
// changes), a missing container ErrNotFound.
func (c *Client) ContainerRename(ctx context.Context, id, name string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/rename", query: url.Values{"name": {name}}}, nil, nil)
}

// RemoveOptions are the options of ContainerRemove.
type RemoveOptions struct {
	Force   bool // kill a running container first
	Volumes bool // remove its anonymous volumes
}

// ContainerRemove removes a container. A missing one matches ErrNotFound.
func (c *Client) ContainerRemove(ctx context.Context, id string, opts RemoveOptions) error {
	q := url.Values{}
	if opts.Force {
		q.Set("force", "1")
	}
	if opts.Volumes {
		q.Set("v", "1")
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/containers/" + pathEscape(id), query: q}, nil, nil)
}

// ContainerState is the State part of a container inspect.
type ContainerState struct {
	Status     string `json:"Status"` // created, running, paused, restarting, removing, exited, dead
	Running    bool   `json:"Running"`
	Paused     bool   `json:"Paused"`
	OOMKilled  bool   `json:"OOMKilled"`
	Dead       bool   `json:"Dead"`
	Pid        int    `json:"Pid"`
	ExitCode   int    `json:"ExitCode"`
	Error      string `json:"Error"`
	StartedAt  string `json:"StartedAt"`
	FinishedAt string `json:"FinishedAt"`
}

// MountPoint is one mount as inspect reports it.
type MountPoint struct {
	Type        string `json:"Type"`
	Name        string `json:"Name"`
	Source      string `json:"Source"`
	Destination string `json:"Destination"`
	RW          bool   `json:"RW"`
}

// ContainerJSON is the engine's container inspect answer (the fields
// Stockade uses).
type ContainerJSON struct {
	ID      string         `json:"Id"`
	Name    string         `json:"Name"`
	Image   string         `json:"Image"` // image ID
	Created string         `json:"Created"`
	State   ContainerState `json:"State"`
	Config  struct {
		Image      string            `json:"Image"`
		Env        []string          `json:"Env"`
		Cmd        []string          `json:"Cmd"`
		User       string            `json:"User"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig      HostConfig   `json:"HostConfig"`
	Mounts          []MountPoint `json:"Mounts"`
	NetworkSettings struct {
		Networks map[string]struct {
			NetworkID string `json:"NetworkID"`
			IPAddress string `json:"IPAddress"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// ContainerInspect returns a container's state and configuration; a missing
// container matches ErrNotFound.
func (c *Client) ContainerInspect(ctx context.Context, id string) (ContainerJSON, error) {
	var v ContainerJSON
	err := c.call(ctx, request{method: http.MethodGet, path: "/containers/" + pathEscape(id) + "/json"}, nil, &v)
	return v, err
}

// ContainerSummary is one entry of a container list.
type ContainerSummary struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	Image   string            `json:"Image"`
	ImageID string            `json:"ImageID"`
	Created int64             `json:"Created"` // Unix seconds
	State   string            `json:"State"`
	Status  string            `json:"Status"`
	Labels  map[string]string `json:"Labels"`
}

// ListOptions are the options of ContainerList.
type ListOptions struct {
	All     bool // include stopped containers
	Filters Filters
}

// ContainerList lists containers.
func (c *Client) ContainerList(ctx context.Context, opts ListOptions) ([]ContainerSummary, error) {
	q := url.Values{}
	if opts.All {
		q.Set("all", "1")
	}
	if err := opts.Filters.encode(q); err != nil {
		return nil, err
	}
	var v []ContainerSummary
	err := c.call(ctx, request{method: http.MethodGet, path: "/containers/json", query: q}, nil, &v)
	return v, err
}

// LogsOptions are the options of ContainerLogs. The zero value reads
// nothing; set Stdout and/or Stderr.
type LogsOptions struct {
	Stdout, Stderr bool
	Follow         bool   // stream until the container stops
	Tail           string // "all" or a line count; "" means all
}

// ContainerLogs copies the container's logs, demultiplexed, to stdout and
// stderr (nil discards). Cap what you keep by passing *Buffer writers.
func (c *Client) ContainerLogs(ctx context.Context, id string, opts LogsOptions, stdout, stderr io.Writer) error {
	q := url.Values{}
	if opts.Stdout {
		q.Set("stdout", "1")
	}
	if opts.Stderr {
		q.Set("stderr", "1")
	}
	if opts.Follow {
		q.Set("follow", "1")
	}
	if opts.Tail != "" {
		q.Set("tail", opts.Tail)
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + pathEscape(id) + "/logs", query: q})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return copyStream(ctx, resp, stdout, stderr)
}

// copyStream demultiplexes resp's body. Stockade never allocates a TTY, so
// every output stream the engine sends it is multiplexed (engines before API
// 1.42 call it raw-stream all the same).
func copyStream(ctx context.Context, resp *http.Response, stdout, stderr io.Writer) error {
	err := Demux(resp.Body, stdout, stderr)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ContainerAttach attaches to a container's stdout and stderr and returns
// the live, multiplexed stream (read it with Demux) from now until the
// container stops. Attach before ContainerStart to see all the output; the
// caller must keep reading, or the container blocks on its writes, and must
// close the stream.
func (c *Client) ContainerAttach(ctx context.Context, id string) (io.ReadCloser, error) {
	q := url.Values{"stream": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(id) + "/attach", query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
