// Package dockerapi is a small client for the Docker Engine API with no
// dependencies outside the standard library.
//
// It implements only what Stockade needs: ping, version and info; images
// (inspect, pull, load, remove, list); containers (create, start, wait, kill,
// remove, inspect, list, logs); exec (create, start, inspect); archives (HEAD,
// GET, PUT); networks; volumes; and the events stream. Every call takes a
// context, and cancelling it ends the call promptly, including streams.
//
// Threat model: the engine is trusted, the containers are not. Everything a
// container produces (logs, exec output, archives) is read through a cap the
// caller chooses, and what passes the cap is drained and counted rather than
// kept, so a hostile container can neither exhaust our memory nor block on a
// pipe we stopped reading.
//
// Errors from the engine are *Error values carrying the HTTP status and the
// engine's message; match them with errors.Is against ErrNotFound,
// ErrConflict, ErrNotRunning and the other sentinels. Podman's
// compatibility API answers some conditions with a 500 and a structured
// cause; those match the sentinel Docker's status for the same condition
// would. Callers never need to look at the message text.
package dockerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// API versions this client speaks. Against an engine whose version lies
// between them, the client talks the engine's version; against a newer engine
// it talks MaxAPIVersion.
const (
	MinAPIVersion = "1.41"
	MaxAPIVersion = "1.47"
)

// maxErrorBody caps how much of an error response is read, in bytes.
const maxErrorBody = 64 << 10

// maxJSONBody caps a non-streamed JSON answer (inspect, list), in bytes.
const maxJSONBody = 64 << 20

// ErrNoEngine reports that no engine socket could be found; its *NoEngineError
// names every place that was looked at.
var ErrNoEngine = errors.New("dockerapi: no docker engine found")

// NoEngineError lists where New looked for an engine.
type NoEngineError struct {
	Looked []string // DOCKER_HOST value or socket paths, in order
}

func (e *NoEngineError) Error() string {
	return "dockerapi: no docker engine found (set DOCKER_HOST; looked at " + strings.Join(e.Looked, ", ") + ")"
}

// Is reports whether target is ErrNoEngine.
func (e *NoEngineError) Is(target error) bool { return target == ErrNoEngine }

// ErrUnsupportedVersion reports an engine older than MinAPIVersion.
var ErrUnsupportedVersion = errors.New("dockerapi: engine API version not supported")

// DefaultSockets returns the Unix sockets New tries, in order, when
// DOCKER_HOST is unset. A leading "~/" is the user's home directory. The
// list is a copy: nothing a caller does to it changes where New looks.
func DefaultSockets() []string { return slices.Clone(defaultSockets) }

// defaultSockets is DefaultSockets' list; only this package's tests replace
// it (export_test.go).
var defaultSockets = []string{
	"/var/run/docker.sock",
	"~/.docker/run/docker.sock",
	"~/.colima/default/docker.sock",
	"~/.orbstack/run/docker.sock",
	"~/.rd/docker.sock",
	"/run/podman/podman.sock",
}

// Client talks to one engine. Create it with New; it is safe for concurrent
// use.
type Client struct {
	host    string // as given or found: unix:///path or tcp://host:port
	network string // "unix" or "tcp"
	addr    string // socket path or host:port
	hc      *http.Client

	mu      sync.Mutex
	version string // negotiated; "" until the first call
	pinned  string // APIVersion option; skips negotiation
}

// Option configures a Client.
type Option func(*Client)

// WithAPIVersion fixes the API version instead of negotiating it.
func WithAPIVersion(v string) Option { return func(c *Client) { c.pinned = v } }

// New returns a client for host, which is "unix:///path/to.sock" or
// "tcp://host:port". An empty host means DOCKER_HOST, or else the first of
// DefaultSockets that exists; if none does, the error matches ErrNoEngine and
// names where it looked. New does not contact the engine.
func New(host string, opts ...Option) (*Client, error) {
	if host == "" {
		var err error
		if host, err = FindHost(); err != nil {
			return nil, err
		}
	}
	c := &Client{host: host}
	switch {
	case strings.HasPrefix(host, "unix://"):
		c.network, c.addr = "unix", strings.TrimPrefix(host, "unix://")
	case strings.HasPrefix(host, "tcp://"):
		c.network, c.addr = "tcp", strings.TrimPrefix(host, "tcp://")
	default:
		return nil, fmt.Errorf("dockerapi: unsupported host %q: want unix:// or tcp://", host)
	}
	if c.addr == "" {
		return nil, fmt.Errorf("dockerapi: host %q has no address", host)
	}
	for _, o := range opts {
		o(c)
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, c.network, c.addr)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// FindHost returns the engine address New would use: DOCKER_HOST if set,
// else unix:// of the first existing socket in DefaultSockets.
func FindHost() (string, error) {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h, nil
	}
	home, _ := os.UserHomeDir()
	looked := []string{"DOCKER_HOST (unset)"}
	for _, s := range defaultSockets {
		if strings.HasPrefix(s, "~/") {
			if home == "" {
				continue
			}
			s = filepath.Join(home, s[2:])
		}
		looked = append(looked, s)
		if fi, err := os.Stat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + s, nil
		}
	}
	return "", &NoEngineError{Looked: looked}
}

// Host returns the engine address the client uses.
func (c *Client) Host() string { return c.host }

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// APIVersion negotiates (once) and returns the API version in use.
func (c *Client) APIVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	v := c.version
	if v == "" && c.pinned != "" {
		v, c.version = c.pinned, c.pinned
	}
	c.mu.Unlock()
	if v != "" {
		return v, nil
	}
	resp, err := c.do(ctx, http.MethodGet, "/_ping", nil, nil, nil, "")
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		// The engine's answer, typed like every other call's.
		defer drainClose(resp.Body)
		return "", newError(request{method: http.MethodGet, path: "/_ping"}, resp)
	}
	drainClose(resp.Body)
	v, err = negotiate(resp.Header.Get("Api-Version"))
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
	return v, nil
}

// negotiate picks the version to talk given the engine's.
func negotiate(engine string) (string, error) {
	if engine == "" {
		// Engines older than 1.25 do not send the header; none of them is
		// supported.
		return "", fmt.Errorf("%w: engine did not report its API version (need at least %s)", ErrUnsupportedVersion, MinAPIVersion)
	}
	if compareVersions(engine, MinAPIVersion) < 0 {
		return "", fmt.Errorf("%w: engine speaks %s, need at least %s", ErrUnsupportedVersion, engine, MinAPIVersion)
	}
	if compareVersions(engine, MaxAPIVersion) > 0 {
		return MaxAPIVersion, nil
	}
	return engine, nil
}

// compareVersions compares dotted API versions such as "1.41".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// request describes one call. Every call goes through send.
type request struct {
	method  string
	path    string // without the version prefix
	query   url.Values
	body    io.Reader // raw body; JSON bodies are encoded by the caller helpers
	ctype   string
	headers map[string]string
	// ok lists the statuses that count as success; empty means 2xx.
	ok []int
	// notRunning marks calls that need a running container (kill, exec
	// create, exec start): their not-running answers match ErrNotRunning;
	// see answerNotRunning.
	notRunning bool
}

// send performs r against the negotiated API version and returns the
// response for a successful status, or an *Error built from the engine's
// answer. The caller closes the body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	v, err := c.APIVersion(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, r.method, "/v"+v+r.path, r.query, r.body, r.headers, r.ctype)
	if err != nil {
		return nil, err
	}
	if statusOK(resp.StatusCode, r.ok) {
		return resp, nil
	}
	defer drainClose(resp.Body)
	return nil, newError(r, resp)
}

func statusOK(code int, ok []int) bool {
	if len(ok) == 0 {
		return code >= 200 && code < 300
	}
	for _, c := range ok {
		if c == code {
			return true
		}
	}
	return false
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, headers map[string]string, ctype string) (*http.Response, error) {
	hostPart := "docker" // ignored by the unix dialer
	if c.network == "tcp" {
		hostPart = c.addr
	}
	u := "http://" + hostPart + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("dockerapi: %s %s: %w", method, path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "stockade-dockerapi")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dockerapi: %s %s: %w", method, path, ctx.Err())
		}
		return nil, &ConnError{Host: c.host, Err: err}
	}
	return resp, nil
}

// ConnError reports that the engine could not be reached or the connection
// broke.
type ConnError struct {
	Host string
	Err  error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("dockerapi: cannot talk to the engine at %s: %v", e.Host, e.Err)
}
func (e *ConnError) Unwrap() error { return e.Err }

func drainClose(rc io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	rc.Close()
}

// jsonBody encodes v for a request body.
func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("dockerapi: encode request: %w", err)
	}
	return bytes.NewReader(b), nil
}

// call sends r (with an optional JSON request body in) and decodes a JSON
// answer into out when out is non-nil.
func (c *Client) call(ctx context.Context, r request, in, out any) error {
	if in != nil {
		b, err := jsonBody(in)
		if err != nil {
			return err
		}
		r.body, r.ctype = b, "application/json"
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer drainClose(resp.Body)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("dockerapi: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return nil
}

// Filters are the engine's list filters, such as
// {"label": {"io.stockade.owner=x"}}.
type Filters map[string][]string

// LabelFilter returns a filter matching every given "key" or "key=value".
func LabelFilter(labels ...string) Filters {
	return Filters{"label": labels}
}

// LabelsFilter matches every key=value of m.
func LabelsFilter(m map[string]string) Filters {
	f := Filters{}
	for k, v := range m {
		f["label"] = append(f["label"], k+"="+v)
	}
	return f
}

func (f Filters) encode(q url.Values) error {
	if len(f) == 0 {
		return nil
	}
	b, err := json.Marshal(map[string][]string(f))
	if err != nil {
		return fmt.Errorf("dockerapi: encode filters: %w", err)
	}
	q.Set("filters", string(b))
	return nil
}

func pathEscape(s string) string { return url.PathEscape(s) }
