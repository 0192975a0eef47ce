package dockerapi_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// calls are the client calls the error tests drive, each with the handler
// pattern it reaches.
var calls = map[string]struct {
	pattern string
	call    func(context.Context, *dockerapi.Client) error
}{
	"inspect": {"GET /containers/c1/json", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.ContainerInspect(ctx, "c1")
		return err
	}},
	"remove": {"DELETE /containers/c1", func(ctx context.Context, c *dockerapi.Client) error {
		return c.ContainerRemove(ctx, "c1", dockerapi.RemoveOptions{})
	}},
	"kill": {"POST /containers/c1/kill", func(ctx context.Context, c *dockerapi.Client) error {
		return c.ContainerKill(ctx, "c1", "")
	}},
	"exec-create": {"POST /containers/c1/exec", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.ExecCreate(ctx, "c1", dockerapi.ExecConfig{Cmd: []string{"true"}})
		return err
	}},
	"exec-start": {"POST /exec/e1/start", func(ctx context.Context, c *dockerapi.Client) error {
		return c.ExecStart(ctx, "e1", nil, nil)
	}},
	"pull": {"POST /images/create", func(ctx context.Context, c *dockerapi.Client) error {
		return c.ImagePull(ctx, "nope:latest")
	}},
	"logs": {"GET /containers/c1/logs", func(ctx context.Context, c *dockerapi.Client) error {
		return c.ContainerLogs(ctx, "c1", dockerapi.LogsOptions{Stdout: true}, nil, nil)
	}},
	"image-load": {"POST /images/load", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.ImageLoad(ctx, strings.NewReader("not a tar"))
		return err
	}},
	"archive-stat": {"HEAD /containers/c1/archive", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.ArchiveStat(ctx, "c1", "/etc")
		return err
	}},
}

func TestErrorMapping(t *testing.T) {
	const html = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n"
	tests := []struct {
		name    string
		call    string
		status  int
		ctype   string
		body    string
		method  string
		path    string
		message string // want Error.Message
		want    []string
	}{
		{"404 json", "inspect", 404, "application/json", `{"message":"No such container: c1"}`,
			"GET", "/containers/c1/json", "No such container: c1", []string{"ErrNotFound"}},
		{"404 plain text", "inspect", 404, "text/plain", "page not found\n",
			"GET", "/containers/c1/json", "page not found", []string{"ErrNotFound"}},
		{"404 empty", "inspect", 404, "", "",
			"GET", "/containers/c1/json", "Not Found", []string{"ErrNotFound"}},
		{"404 on HEAD", "archive-stat", 404, "", "",
			"HEAD", "/containers/c1/archive", "Not Found", []string{"ErrNotFound"}},
		{"409 remove running", "remove", 409, "application/json",
			`{"message":"You cannot remove a running container c1. Stop the container before attempting removal or force remove"}`,
			"DELETE", "/containers/c1", "You cannot remove a running container c1. Stop the container before attempting removal or force remove",
			[]string{"ErrConflict"}},
		{"409 kill", "kill", 409, "application/json", `{"message":"Cannot kill container: c1: Container c1 is not running"}`,
			"POST", "/containers/c1/kill", "Cannot kill container: c1: Container c1 is not running", []string{"ErrConflict", "ErrNotRunning"}},
		{"409 kill paused, other text", "kill", 409, "application/json", `{"message":"Container c1 is paused"}`,
			"POST", "/containers/c1/kill", "Container c1 is paused", []string{"ErrConflict", "ErrNotRunning"}},
		{"409 exec create", "exec-create", 409, "application/json", `{"message":"Container c1 is not running"}`,
			"POST", "/containers/c1/exec", "Container c1 is not running", []string{"ErrConflict", "ErrNotRunning"}},
		{"409 inspect: the call site, not the text, decides", "inspect", 409, "text/plain", "Container c1 is not running",
			"GET", "/containers/c1/json", "Container c1 is not running", []string{"ErrConflict"}},
		{"409 exec start", "exec-start", 409, "application/json", `{"message":"Container c1 is not running"}`,
			"POST", "/exec/e1/start", "Container c1 is not running", []string{"ErrConflict", "ErrNotRunning"}},
		{"404 exec start", "exec-start", 404, "application/json", `{"message":"No such exec instance: e1"}`,
			"POST", "/exec/e1/start", "No such exec instance: e1", []string{"ErrNotFound"}},
		{"500 exec start, other failure", "exec-start", 500, "application/json", `{"message":"boom"}`,
			"POST", "/exec/e1/start", "boom", []string{"ErrEngine"}},
		{"409 empty", "remove", 409, "", "",
			"DELETE", "/containers/c1", "Conflict", []string{"ErrConflict"}},
		{"500 json", "inspect", 500, "application/json", `{"message":"boom"}`,
			"GET", "/containers/c1/json", "boom", []string{"ErrEngine"}},
		{"500 json without message", "inspect", 500, "application/json", `{"error":"boom"}`,
			"GET", "/containers/c1/json", `{"error":"boom"}`, []string{"ErrEngine"}},
		{"500 plain text", "logs", 500, "text/plain; charset=utf-8", "  write /var/lib/docker: no space left on device\n",
			"GET", "/containers/c1/logs", "write /var/lib/docker: no space left on device", []string{"ErrEngine"}},
		{"500 empty", "image-load", 500, "", "",
			"POST", "/images/load", "Internal Server Error", []string{"ErrEngine"}},
		{"502 html", "inspect", 502, "text/html", html,
			"GET", "/containers/c1/json", strings.TrimSpace(html), []string{"ErrEngine"}},
		{"503 truncated json", "inspect", 503, "application/json", `{"message":"bo`,
			"GET", "/containers/c1/json", `{"message":"bo`, []string{"ErrEngine"}},
		{"400", "exec-create", 400, "application/json", `{"message":"No exec command specified"}`,
			"POST", "/containers/c1/exec", "No exec command specified", []string{"ErrBadRequest"}},
		{"401", "inspect", 401, "", "", "GET", "/containers/c1/json", "Unauthorized", []string{"ErrForbidden"}},
		{"403", "inspect", 403, "application/json", `{"message":"authorization denied by plugin"}`,
			"GET", "/containers/c1/json", "authorization denied by plugin", []string{"ErrForbidden"}},
		{"304 where it is not success", "kill", 304, "", "",
			"POST", "/containers/c1/kill", "Not Modified", []string{"ErrNotModified"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			call := calls[tt.call]
			f.handle(call.pattern, answer(tt.status, tt.ctype, tt.body))
			err := call.call(context.Background(), c)
			var e *dockerapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("%s = %v (%T); want *dockerapi.Error", tt.call, err, err)
			}
			if e.StatusCode != tt.status || e.Method != tt.method || e.Path != tt.path || e.Message != tt.message {
				t.Errorf("%s = %+v; want status %d, %s %s, message %q", tt.call, *e, tt.status, tt.method, tt.path, tt.message)
			}
			checkSentinels(t, err, tt.want...)
			if msg := err.Error(); !strings.HasPrefix(msg, "dockerapi: "+tt.method+" "+tt.path) {
				t.Errorf("Error() = %q; want it to start with the call", msg)
			}
		})
	}
}

// TestMessageFact drives every engine answer whose status alone cannot say
// what happened, each recorded from Engine 20.10 (API 1.41), through the
// client, and checks the sentinels it matches: the classification by text
// (messageFact in errors.go) applies only to the answer it was recorded
// from.
func TestMessageFact(t *testing.T) {
	const (
		id = "1c891b9768bf61defe4547bc9bdf053f7b703a7c4a15d8066d7559da4fdace5c"
		// An exec start racing a kill of its container.
		raced = "Container " + id + " is not running: Exited (137) Less than a second ago"
		// A pull of a tag the registry does not have, and of a repository
		// it does not have (Docker Hub's answers).
		noTag  = "manifest for nope:latest not found: manifest unknown: manifest unknown"
		noRepo = "pull access denied for nope, repository does not exist or may require 'docker login'"
	)
	jsonMsg := func(m string) string { return `{"message":"` + m + `"}` }
	stream := func(m string) string { return `{"errorDetail":{"message":"` + m + `"},"error":"` + m + `"}` + "\n" }
	tests := []struct {
		name   string
		call   string
		status int
		body   string
		want   []string
	}{
		{"exec start racing the end", "exec-start", 500, jsonMsg(raced), []string{"ErrEngine", "ErrNotRunning"}},
		{"the same text elsewhere", "inspect", 500, jsonMsg(raced), []string{"ErrEngine"}},
		{"pull of a missing tag", "pull", 200, stream(noTag), []string{"ErrNotFound"}},
		{"pull of a missing repository", "pull", 200, stream(noRepo), []string{"ErrNotFound"}},
		{"load with the same text", "image-load", 200, stream(noTag), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			call := calls[tt.call]
			f.handle(call.pattern, answer(tt.status, "application/json", tt.body))
			err := call.call(context.Background(), c)
			if err == nil {
				t.Fatalf("%s succeeded", tt.call)
			}
			checkSentinels(t, err, tt.want...)
		})
	}
}

// TestErrorLongBody checks that a huge error body (a proxy's HTML page, a
// stack trace) is cut to a short message and not read without bound.
func TestErrorLongBody(t *testing.T) {
	f, c := newFake(t, "1.41")
	f.handle("GET /containers/c1/json", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 1<<10))
		for i := 0; i < 4<<10 && r.Context().Err() == nil; i++ { // 4 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	_, err := c.ContainerInspect(context.Background(), "c1")
	var e *dockerapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("ContainerInspect = %v; want *dockerapi.Error", err)
	}
	if len(e.Message) > 1<<10 || !strings.HasSuffix(e.Message, "…") {
		t.Errorf("Message has %d bytes, ends %q; want a short message ending in …", len(e.Message), e.Message[max(0, len(e.Message)-8):])
	}
	checkSentinels(t, err, "ErrEngine")
}

// TestSuccessStatuses checks the statuses the API documents as success for
// calls where they are not 2xx-only.
func TestSuccessStatuses(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		status  int
		call    func(context.Context, *dockerapi.Client) error
		wantErr bool
	}{
		{"start 204", "POST /containers/c1/start", 204, func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerStart(ctx, "c1") }, false},
		{"start 304 already started", "POST /containers/c1/start", 304, func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerStart(ctx, "c1") }, false},
		{"stop 304 already stopped", "POST /containers/c1/stop", 304, func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerStop(ctx, "c1", 0) }, false},
		{"start 200 is not in the list", "POST /containers/c1/start", 200, func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerStart(ctx, "c1") }, true},
		{"remove 204", "DELETE /containers/c1", 204, func(ctx context.Context, c *dockerapi.Client) error {
			return c.ContainerRemove(ctx, "c1", dockerapi.RemoveOptions{})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			f.handle(tt.pattern, answer(tt.status, "", ""))
			if err := tt.call(context.Background(), c); (err != nil) != tt.wantErr {
				t.Errorf("call = %v; want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestConnError checks that an engine that is not there is a *ConnError,
// not an *Error, and matches no engine sentinel.
func TestConnError(t *testing.T) {
	c, err := dockerapi.New("unix://" + shortTempDir(t) + "/absent.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Ping(context.Background())
	var ce *dockerapi.ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("Ping = %v (%T); want *dockerapi.ConnError", err, err)
	}
	checkSentinels(t, err)
}

func TestNewHost(t *testing.T) {
	tests := []struct {
		host    string
		wantErr bool
	}{
		{"unix:///var/run/docker.sock", false},
		{"tcp://127.0.0.1:2375", false},
		{"unix://", true},
		{"tcp://", true},
		{"ssh://me@host", true},
		{"/var/run/docker.sock", true},
	}
	for _, tt := range tests {
		c, err := dockerapi.New(tt.host)
		if (err != nil) != tt.wantErr {
			t.Errorf("New(%q) = %v; want error %v", tt.host, err, tt.wantErr)
			continue
		}
		if err == nil {
			if c.Host() != tt.host {
				t.Errorf("New(%q).Host() = %q", tt.host, c.Host())
			}
			c.Close()
		}
	}
}

// podmanCalls are the calls TestPodmanAnswers drives beyond calls.
var podmanCalls = map[string]struct {
	pattern string
	call    func(context.Context, *dockerapi.Client) error
}{
	"create": {"POST /containers/create", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.ContainerCreate(ctx, "s1", dockerapi.ContainerConfig{Image: "img"})
		return err
	}},
	"volume-create": {"POST /volumes/create", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: "v1"})
		return err
	}},
	"volume-remove": {"DELETE /volumes/v1", func(ctx context.Context, c *dockerapi.Client) error {
		return c.VolumeRemove(ctx, "v1", false)
	}},
	"network-create": {"POST /networks/create", func(ctx context.Context, c *dockerapi.Client) error {
		_, err := c.NetworkCreate(ctx, dockerapi.NetworkCreate{Name: "n1", CheckDuplicate: true})
		return err
	}},
	"network-remove": {"DELETE /networks/n1", func(ctx context.Context, c *dockerapi.Client) error {
		return c.NetworkRemove(ctx, "n1")
	}},
}

// TestPodmanAnswers drives answers recorded from Podman 4.3.1's
// compatibility API (podman system service, API 1.41) through the client:
// each must match the sentinels Docker's answer to the same condition
// matches, by its status and structured cause, whatever its message says.
func TestPodmanAnswers(t *testing.T) {
	const id = "1f93e7446c023b4777ee41978e59034c300ba045aa338b403c845dea55b84f98"
	podman := func(status int, cause, msg string) string {
		return `{"cause":"` + cause + `","message":"` + msg + `","response":` + strconv.Itoa(status) + `}`
	}
	tests := []struct {
		name   string
		call   string
		status int
		body   string
		want   []string
	}{
		{"create: name in use", "create", 500, podman(500, "that name is already in use",
			`container create: creating container storage: the container name \"s1\" is already in use by `+id+`. You have to remove that container to be able to reuse that name: that name is already in use`),
			[]string{"ErrConflict"}},
		{"create: network gone", "create", 500, podman(500, "network not found",
			"container create: unable to find network with name or ID nonet: network not found"),
			[]string{"ErrNotFound"}},
		{"create: image missing", "create", 404, podman(404, "image not known", "no such image: localhost/nope:1: image not known"),
			[]string{"ErrNotFound"}},
		{"inspect: no such container", "inspect", 404, podman(404, "no such container", `no container with name or ID \"c1\" found: no such container`),
			[]string{"ErrNotFound"}},
		{"remove: a concurrent removal won", "remove", 404, podman(404, "no such container", "container "+id+" does not exist in database: no such container"),
			[]string{"ErrNotFound"}},
		{"kill: not running", "kill", 500, podman(500, "container state improper",
			"can only kill running containers. "+id+" is in state created: container state improper"),
			[]string{"ErrConflict", "ErrNotRunning"}},
		{"exec create: not running", "exec-create", 500, podman(500, "container state improper",
			"can only create exec sessions on running containers: container state improper"),
			[]string{"ErrConflict", "ErrNotRunning"}},
		{"exec start: no such session", "exec-start", 404, podman(404, "no such exec session", "no exec session with ID e1 found: no such exec session"),
			[]string{"ErrNotFound"}},
		{"volume create: a concurrent create won", "volume-create", 500, podman(500, "volume already exists",
			"adding volume to state: name v1 is in use: volume already exists"),
			[]string{"ErrConflict"}},
		{"volume remove: in use", "volume-remove", 409, podman(409, "volume is being used",
			"volume v1 is being used by the following container(s): "+id+": volume is being used"),
			[]string{"ErrConflict"}},
		{"volume remove: no such volume", "volume-remove", 404, podman(404, "no such volume", `no volume with name \"v1\" found: no such volume`),
			[]string{"ErrNotFound"}},
		{"network create: name taken", "network-create", 500, podman(500, "network already exists", "network name n1 already used: network already exists"),
			[]string{"ErrConflict"}},
		{"network remove: in use", "network-remove", 500, podman(500, "network is being used",
			`\"n1\" has associated containers with it. Use -f to forcibly delete containers and pods: network is being used`),
			[]string{"ErrForbidden"}},
		{"network remove: not found", "network-remove", 404, podman(404, "network not found", "network not found"),
			[]string{"ErrNotFound"}},
		{"an unknown cause stays a 500", "create", 500, podman(500, "OCI permission denied",
			"runc: runc create failed: unable to start container process: error setting rlimit type 7: operation not permitted: OCI permission denied"),
			[]string{"ErrEngine"}},
		{"a known cause in the message only is not read", "remove", 500, `{"message":"x: no such container"}`,
			[]string{"ErrEngine"}},
		{"a known cause with another status keeps the status", "inspect", 400, podman(400, "no such container", "bad"),
			[]string{"ErrBadRequest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			call, ok := calls[tt.call]
			if !ok {
				call = podmanCalls[tt.call]
			}
			f.handle(call.pattern, answer(tt.status, "application/json", tt.body))
			err := call.call(context.Background(), c)
			var e *dockerapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("%s = %v (%T); want *dockerapi.Error", tt.call, err, err)
			}
			if e.StatusCode != tt.status {
				t.Errorf("StatusCode = %d; want %d, as sent", e.StatusCode, tt.status)
			}
			checkSentinels(t, err, tt.want...)
		})
	}
}
