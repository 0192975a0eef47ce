package dockerapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// ExecConfig is the body of POST /containers/{id}/exec.
type ExecConfig struct {
	Cmd          []string `json:"Cmd"`
	Env          []string `json:"Env,omitempty"` // KEY=value, added to the container's
	User         string   `json:"User,omitempty"`
	WorkingDir   string   `json:"WorkingDir,omitempty"`
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
	Privileged   bool     `json:"Privileged"`
	Tty          bool     `json:"Tty"`
}

// ExecCreate prepares cmd in a running container and returns the exec ID. A
// container that is not running matches ErrNotRunning.
func (c *Client) ExecCreate(ctx context.Context, containerID string, cfg ExecConfig) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := c.call(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(containerID) + "/exec", notRunning: true}, cfg, &out)
	return out.ID, err
}

// ExecStart runs the exec and copies its output, demultiplexed, to stdout and
// stderr (nil discards) until the command ends. Pass *Buffer writers to cap
// what is kept; the rest is still read, so the command never blocks on a full
// pipe. Cancelling ctx ends the call but not the command: the engine cannot
// kill an exec, so callers that need that must arrange it themselves.
func (c *Client) ExecStart(ctx context.Context, execID string, stdout, stderr io.Writer) error {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/exec/" + pathEscape(execID) + "/start", ctype: "application/json", notRunning: true,
		body: jsonReader(`{"Detach":false,"Tty":false}`)})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return copyStream(ctx, resp, stdout, stderr)
}

// ExecAttach starts the exec (created with AttachStdin) on a hijacked
// connection and returns it: writes go to the command's stdin, reads give
// its multiplexed output (read it with Demux) until it ends. The caller
// must keep reading and must close the connection, which also closes the
// command's stdin. Cancelling ctx after ExecAttach returned does not end
// the connection: Close does.
func (c *Client) ExecAttach(ctx context.Context, execID string) (io.ReadWriteCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/exec/" + pathEscape(execID) + "/start", ctype: "application/json", notRunning: true,
		headers: map[string]string{"Connection": "Upgrade", "Upgrade": "tcp"}, ok: []int{http.StatusSwitchingProtocols},
		body: jsonReader(`{"Detach":false,"Tty":false}`)})
	if err != nil {
		return nil, err
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("dockerapi: exec %s: the engine did not hand over the connection", execID)
	}
	return rw, nil
}

// ExecStartStdin is ExecStart for an exec created with AttachStdin: it
// copies stdin to the command's standard input while copying its output,
// demultiplexed, to stdout and stderr (nil discards) until the command
// ends or ctx does. The engine's connection cannot be half-closed, so the
// command never sees the end of stdin: it must stop reading by itself.
// The copy of stdin may still be blocked in stdin.Read when
// ExecStartStdin returns; the caller ends it by closing stdin (a pipe).
func (c *Client) ExecStartStdin(ctx context.Context, execID string, stdin io.Reader, stdout, stderr io.Writer) error {
	rw, err := c.ExecAttach(ctx, execID)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			rw.Close()
		case <-done:
		}
	}()
	go io.Copy(rw, stdin) // ends when stdin does or the connection closes
	err = Demux(rw, stdout, stderr)
	rw.Close()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ExecStartDetached starts the exec without attaching to its output.
func (c *Client) ExecStartDetached(ctx context.Context, execID string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/exec/" + pathEscape(execID) + "/start", ctype: "application/json", notRunning: true,
		body: jsonReader(`{"Detach":true,"Tty":false}`)}, nil, nil)
}

// ExecInspect is the state of an exec.
type ExecInspect struct {
	ID          string `json:"ID"`
	ContainerID string `json:"ContainerID"`
	Running     bool   `json:"Running"`
	ExitCode    *int   `json:"ExitCode"` // nil while running
	Pid         int    `json:"Pid"`      // host PID namespace
}

// ExecInspect returns the state of an exec.
func (c *Client) ExecInspect(ctx context.Context, execID string) (ExecInspect, error) {
	var v ExecInspect
	err := c.call(ctx, request{method: http.MethodGet, path: "/exec/" + pathEscape(execID) + "/json"}, nil, &v)
	return v, err
}
