package dockerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

func TestNegotiateVersion(t *testing.T) {
	tests := []struct {
		name   string
		engine string // Api-Version header; "" sends none
		pinned string // WithAPIVersion; "" negotiates
		want   string // version the client talks; "" means ErrUnsupportedVersion
	}{
		{"our engine", "1.41", "", "1.41"},
		{"between min and max", "1.44", "", "1.44"},
		{"exactly max", dockerapi.MaxAPIVersion, "", dockerapi.MaxAPIVersion},
		{"newer than max", "1.52", "", dockerapi.MaxAPIVersion},
		{"newer major", "2.0", "", dockerapi.MaxAPIVersion},
		{"minor compared as a number", "1.100", "", dockerapi.MaxAPIVersion},
		{"older than min", "1.40", "", ""},
		{"ancient", "1.24", "", ""},
		{"no header", "", "", ""},
		{"pinned", "1.41", "1.43", "1.43"},
		{"pinned skips negotiation", "", "1.41", "1.41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []dockerapi.Option
			if tt.pinned != "" {
				opts = append(opts, dockerapi.WithAPIVersion(tt.pinned))
			}
			f, c := newFake(t, tt.engine, opts...)
			f.handle("GET /version", answer(200, "application/json", `{"Version":"fake","ApiVersion":"`+tt.engine+`"}`))

			v, err := c.Version(context.Background())
			if tt.want == "" {
				if !errors.Is(err, dockerapi.ErrUnsupportedVersion) {
					t.Fatalf("Version = %v; want ErrUnsupportedVersion", err)
				}
				if got := f.requests(); !reflect.DeepEqual(got, []string{"GET /_ping"}) {
					t.Errorf("requests = %q; want only the ping", got)
				}
				return
			}
			if err != nil || v.Version != "fake" {
				t.Fatalf("Version = %+v, %v", v, err)
			}
			got, err := c.APIVersion(context.Background())
			if err != nil || got != tt.want {
				t.Errorf("APIVersion = %q, %v; want %q", got, err, tt.want)
			}
			want := []string{"GET /_ping", "GET /v" + tt.want + "/version"}
			if tt.pinned != "" {
				want = want[1:]
			}
			if got := f.requests(); !reflect.DeepEqual(got, want) {
				t.Errorf("requests = %q; want %q", got, want)
			}
		})
	}
}

// TestNegotiateOnce checks that concurrent first calls all use the
// negotiated version and that later calls do not ping again.
func TestNegotiateOnce(t *testing.T) {
	f, c := newFake(t, "1.43")
	f.handle("GET /info", answer(200, "application/json", `{"NCPU":2}`))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Info(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	pings := 0
	for _, r := range f.requests() {
		switch r {
		case "GET /_ping":
			pings++
		case "GET /v1.43/info":
		default:
			t.Errorf("unexpected request %q", r)
		}
	}
	if pings < 1 || pings > 8 {
		t.Errorf("%d pings for 9 calls; want between 1 and 8", pings)
	}
}

func TestPingError(t *testing.T) {
	f, c := newFake(t, "1.41")
	f.handle("GET /_ping", answer(500, "text/plain", "daemon is shutting down"))
	err := c.Ping(context.Background())
	var e *dockerapi.Error
	if !errors.As(err, &e) || e.StatusCode != 500 || e.Message != "daemon is shutting down" {
		t.Fatalf("Ping = %v; want *Error 500 with the engine's text", err)
	}
	checkSentinels(t, err, "ErrEngine")
}

// withSockets replaces the default sockets for the test: absolute entries
// move under root so the host's real sockets never answer; "~/" entries
// stay.
func withSockets(t *testing.T, root string) {
	t.Helper()
	var s []string
	for _, p := range dockerapi.DefaultSockets() {
		if !strings.HasPrefix(p, "~/") {
			p = filepath.Join(root, p)
		}
		s = append(s, p)
	}
	dockerapi.SetSockets(t, s)
}

// listenUnix makes a socket at path (creating its directory) that is closed
// when t ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// Not parallel: it sets the environment and the default sockets.
func TestFindHost(t *testing.T) {
	tests := []struct {
		name       string
		dockerHost string
		home       bool     // set HOME to a temp dir
		sockets    []string // sockets to create, "~/" under HOME, others under root
		files      []string // regular files to create at socket paths
		want       string   // "~/" under HOME; "" means NoEngineError
	}{
		{"DOCKER_HOST unix", "unix:///somewhere/docker.sock", true, []string{"~/.docker/run/docker.sock"}, nil, "unix:///somewhere/docker.sock"},
		{"DOCKER_HOST tcp", "tcp://10.0.0.1:2375", false, nil, nil, "tcp://10.0.0.1:2375"},
		{"system socket first", "", true, []string{"/var/run/docker.sock", "~/.docker/run/docker.sock"}, nil, "/var/run/docker.sock"},
		{"docker desktop", "", true, []string{"~/.docker/run/docker.sock", "~/.colima/default/docker.sock"}, nil, "~/.docker/run/docker.sock"},
		{"colima", "", true, []string{"~/.colima/default/docker.sock"}, nil, "~/.colima/default/docker.sock"},
		{"orbstack", "", true, []string{"~/.orbstack/run/docker.sock"}, nil, "~/.orbstack/run/docker.sock"},
		{"rancher desktop", "", true, []string{"~/.rd/docker.sock"}, nil, "~/.rd/docker.sock"},
		{"podman", "", true, []string{"/run/podman/podman.sock"}, nil, "/run/podman/podman.sock"},
		{"a file is not a socket", "", true, nil, []string{"/var/run/docker.sock", "~/.rd/docker.sock"}, ""},
		{"nothing", "", true, nil, nil, ""},
		{"nothing and no HOME", "", false, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := shortTempDir(t)
			home := ""
			if tt.home {
				home = shortTempDir(t)
			}
			t.Setenv("HOME", home)
			t.Setenv("DOCKER_HOST", tt.dockerHost)
			withSockets(t, root)
			abs := func(p string) string {
				if rest, ok := strings.CutPrefix(p, "~/"); ok {
					return filepath.Join(home, rest)
				}
				return filepath.Join(root, p)
			}
			for _, s := range tt.sockets {
				listenUnix(t, abs(s))
			}
			for _, p := range tt.files {
				os.MkdirAll(filepath.Dir(abs(p)), 0o700)
				if err := os.WriteFile(abs(p), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}

			got, err := dockerapi.FindHost()
			if tt.want != "" {
				want := tt.want
				if tt.dockerHost == "" {
					want = "unix://" + abs(tt.want)
				}
				if err != nil || got != want {
					t.Fatalf("FindHost() = %q, %v; want %q", got, err, want)
				}
				c, err := dockerapi.New("")
				if err != nil || c.Host() != want {
					t.Fatalf("New(\"\") = %v, %v; want host %q", c, err, want)
				}
				c.Close()
				return
			}

			var ne *dockerapi.NoEngineError
			if !errors.As(err, &ne) || !errors.Is(err, dockerapi.ErrNoEngine) {
				t.Fatalf("FindHost() = %q, %v; want *NoEngineError matching ErrNoEngine", got, err)
			}
			want := []string{"DOCKER_HOST (unset)"}
			for _, s := range dockerapi.DefaultSockets() {
				if strings.HasPrefix(s, "~/") && home == "" {
					continue // no home: nothing to look at
				}
				if strings.HasPrefix(s, "~/") {
					want = append(want, abs(s))
				} else {
					want = append(want, s)
				}
			}
			if !slices.Equal(ne.Looked, want) {
				t.Errorf("Looked = %q; want %q", ne.Looked, want)
			}
			for _, l := range want {
				if !strings.Contains(err.Error(), l) {
					t.Errorf("error %q does not name %q", err, l)
				}
			}
			if _, err := dockerapi.New(""); !errors.Is(err, dockerapi.ErrNoEngine) {
				t.Errorf("New(\"\") = %v; want ErrNoEngine", err)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	type call func(context.Context, *dockerapi.Client) error
	owner := dockerapi.LabelFilter("io.stockade.owner=o1", "io.stockade.managed")
	tests := []struct {
		name      string
		pattern   string
		body      string
		call      call
		wantQuery map[string]string // besides filters
		want      map[string][]string
	}{
		{"containers", "GET /containers/json", `[]`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: owner})
			return err
		}, map[string]string{"all": "1"}, map[string][]string{"label": {"io.stockade.owner=o1", "io.stockade.managed"}}},
		{"containers no filter", "GET /containers/json", `[]`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerList(ctx, dockerapi.ListOptions{})
			return err
		}, map[string]string{"all": ""}, nil},
		{"images", "GET /images/json", `[]`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ImageList(ctx, dockerapi.LabelsFilter(map[string]string{"a": "1", "b": "x=y"}))
			return err
		}, nil, map[string][]string{"label": {"a=1", "b=x=y"}}},
		{"networks", "GET /networks", `[]`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.NetworkList(ctx, dockerapi.Filters{"label": {"k=v"}, "name": {"stockade-"}})
			return err
		}, nil, map[string][]string{"label": {"k=v"}, "name": {"stockade-"}}},
		{"volumes", "GET /volumes", `{"Volumes":[]}`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.VolumeList(ctx, owner)
			return err
		}, nil, map[string][]string{"label": {"io.stockade.owner=o1", "io.stockade.managed"}}},
		{"events", "GET /events", ``, func(ctx context.Context, c *dockerapi.Client) error {
			s, err := c.Events(ctx, dockerapi.EventOptions{Filters: dockerapi.Filters{"type": {"container"}, "label": {"k=v w"}}})
			if err == nil {
				s.Close()
			}
			return err
		}, map[string]string{"since": "", "until": ""}, map[string][]string{"type": {"container"}, "label": {"k=v w"}}},
		{"empty filters", "GET /volumes", `{"Volumes":[]}`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.VolumeList(ctx, dockerapi.Filters{})
			return err
		}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			f.handle(tt.pattern, answer(200, "application/json", tt.body))
			if err := tt.call(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			r := f.last(strings.SplitN(tt.pattern, " ", 2)[1])
			q := r.URL.Query()
			for k, v := range tt.wantQuery {
				if got := q.Get(k); got != v {
					t.Errorf("query %s = %q; want %q", k, got, v)
				}
			}
			if tt.want == nil {
				if q.Has("filters") {
					t.Errorf("filters = %q; want none", q.Get("filters"))
				}
				return
			}
			var got map[string][]string
			if err := json.Unmarshal([]byte(q.Get("filters")), &got); err != nil {
				t.Fatalf("filters %q: %v", q.Get("filters"), err)
			}
			for _, v := range got {
				slices.Sort(v)
			}
			for _, v := range tt.want {
				slices.Sort(v)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("filters = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestRequests checks what a few calls put on the wire where a mistake would
// not show as an error: the query of logs, kill, remove and pull, and the
// body of create.
func TestRequests(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		body    string
		call    func(context.Context, *dockerapi.Client) error
		want    string // encoded query
	}{
		{"logs", "GET /containers/c1/logs", "", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ContainerLogs(ctx, "c1", dockerapi.LogsOptions{Stdout: true, Follow: true, Tail: "10"}, nil, nil)
		}, "follow=1&stdout=1&tail=10"},
		{"kill default", "POST /containers/c1/kill", "", func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerKill(ctx, "c1", "") }, ""},
		{"kill signal", "POST /containers/c1/kill", "", func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerKill(ctx, "c1", "SIGTERM") }, "signal=SIGTERM"},
		{"remove", "DELETE /containers/c1", "", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ContainerRemove(ctx, "c1", dockerapi.RemoveOptions{Force: true, Volumes: true})
		}, "force=1&v=1"},
		{"wait default", "POST /containers/c1/wait", `{"StatusCode":0}`, func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerWait(ctx, "c1", "")
			return err
		}, "condition=not-running"},
		{"stop rounds up", "POST /containers/c1/stop", "", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ContainerStop(ctx, "c1", 1500*time.Millisecond)
		}, "t=2"},
		{"pull tag", "POST /images/create", "", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ImagePull(ctx, "example.com:5000/a/b:1.2")
		}, "fromImage=example.com%3A5000%2Fa%2Fb&tag=1.2"},
		{"pull no tag", "POST /images/create", "", func(ctx context.Context, c *dockerapi.Client) error { return c.ImagePull(ctx, "localhost:5000/a") }, "fromImage=localhost%3A5000%2Fa"},
		{"pull digest", "POST /images/create", "", func(ctx context.Context, c *dockerapi.Client) error { return c.ImagePull(ctx, "a/b@sha256:0123") }, "fromImage=a%2Fb&tag=sha256%3A0123"},
		{"tag", "POST /images/sha256:01/tag", "", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ImageTag(ctx, "sha256:01", "example.com/a", "v1")
		}, "repo=example.com%2Fa&tag=v1"},
		{"image remove never prunes", "DELETE /images/x:1", "[]", func(ctx context.Context, c *dockerapi.Client) error { return c.ImageRemove(ctx, "x:1", false) }, "noprune=1"},
		{"load is quiet", "POST /images/load", "", func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ImageLoad(ctx, strings.NewReader(""))
			return err
		}, "quiet=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			status := 200
			switch {
			case strings.HasSuffix(tt.pattern, "/tag"):
				status = 201 // the engine's answer to a tag
			case tt.body == "":
				status = 204
			}
			f.handle(tt.pattern, answer(status, "application/json", tt.body))
			if err := tt.call(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			r := f.last(strings.SplitN(tt.pattern, " ", 2)[1])
			if got := r.URL.RawQuery; got != tt.want {
				t.Errorf("query = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestCreateBody(t *testing.T) {
	f, c := newFake(t, "1.41")
	var body map[string]any
	f.handle("POST /containers/create", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "stockade-x" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("create query %q, content type %q", r.URL.RawQuery, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		w.WriteHeader(201)
		w.Write([]byte(`{"Id":"abc","Warnings":[]}`))
	})
	pids, init := int64(64), true
	id, err := c.ContainerCreate(context.Background(), "stockade-x", dockerapi.ContainerConfig{
		Image: "img",
		Cmd:   []string{"sh"},
		HostConfig: dockerapi.HostConfig{
			ReadonlyRootfs: true, NetworkMode: "none", CapDrop: []string{"ALL"},
			Memory: 1 << 20, MemorySwap: 1 << 20, NanoCPUs: 5e8, PidsLimit: &pids, Init: &init,
			Tmpfs: map[string]string{"/tmp": "size=1m"},
		},
	})
	if err != nil || id != "abc" {
		t.Fatalf("ContainerCreate = %q, %v", id, err)
	}
	hc, _ := body["HostConfig"].(map[string]any)
	want := map[string]any{
		"ReadonlyRootfs": true, "NetworkMode": "none", "CapDrop": []any{"ALL"}, "Privileged": false,
		"Memory": float64(1 << 20), "MemorySwap": float64(1 << 20), "NanoCpus": float64(5e8),
		"PidsLimit": float64(64), "Init": true, "Tmpfs": map[string]any{"/tmp": "size=1m"},
	}
	if !reflect.DeepEqual(hc, want) {
		t.Errorf("HostConfig on the wire = %v; want %v", hc, want)
	}
	// ContainerCreate sends an unset Env as [], never null.
	if env, ok := body["Env"].([]any); !ok || len(env) != 0 {
		t.Errorf("Env on the wire = %#v; want []", body["Env"])
	}
}

func TestCreateNeedsImage(t *testing.T) {
	f, c := newFake(t, "1.41")
	f.handle("POST /containers/create", answer(201, "application/json", `{"Id":"abc"}`))
	if id, err := c.ContainerCreate(context.Background(), "x", dockerapi.ContainerConfig{Cmd: []string{"true"}}); err == nil {
		t.Fatalf("ContainerCreate without an image = %q; want an error", id)
	}
	if got := f.requests(); len(got) != 0 {
		t.Errorf("engine saw %q", got)
	}
}
