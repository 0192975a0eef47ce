package dockerapi_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// fakeEngine is an in-process engine: an HTTP server on a Unix socket that
// answers /_ping with APIVersion and everything else with the handler
// registered for "METHOD /path" (the path without its version prefix).
type fakeEngine struct {
	// APIVersion is the Api-Version header /_ping sends; "" leaves it out.
	APIVersion string

	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	seen     []*http.Request // every request, in order
}

// newFake starts a fake engine speaking apiVersion and returns it with a
// client for it. Both are closed when t ends.
func newFake(t *testing.T, apiVersion string, opts ...dockerapi.Option) (*fakeEngine, *dockerapi.Client) {
	t.Helper()
	f := &fakeEngine{APIVersion: apiVersion, handlers: map[string]http.HandlerFunc{}}
	sock := filepath.Join(shortTempDir(t), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(l)
	c, err := dockerapi.New("unix://"+sock, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close() // also ends streaming handlers, through their contexts
	})
	return f, c
}

// shortTempDir is t.TempDir for Unix sockets: a socket path must fit in 108
// bytes, and t.TempDir embeds the (long) test name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// handle registers h for pattern "METHOD /path", the path as the client
// writes it before adding the version prefix.
func (f *fakeEngine) handle(pattern string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[pattern] = h
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.Clone(r.Context()))
	f.mu.Unlock()
	if r.URL.Path == "/_ping" {
		if f.APIVersion != "" {
			w.Header().Set("Api-Version", f.APIVersion)
		}
		if h := f.handler("GET /_ping"); h != nil {
			h(w, r)
			return
		}
		w.Write([]byte("OK"))
		return
	}
	path, ok := stripVersion(r.URL.Path)
	if !ok {
		http.Error(w, `{"message":"fake: unversioned path"}`, http.StatusBadRequest)
		return
	}
	h := f.handler(r.Method + " " + path)
	if h == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"fake: no handler for ` + r.Method + " " + path + `"}`))
		return
	}
	h(w, r)
}

func (f *fakeEngine) handler(pattern string) http.HandlerFunc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handlers[pattern]
}

// requests returns "METHOD /full/path" of every request seen.
func (f *fakeEngine) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.seen {
		out = append(out, r.Method+" "+r.URL.Path)
	}
	return out
}

// last returns the last request whose version-less path is path.
func (f *fakeEngine) last(path string) *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.seen) - 1; i >= 0; i-- {
		if p, _ := stripVersion(f.seen[i].URL.Path); p == path {
			return f.seen[i]
		}
	}
	return nil
}

// stripVersion turns "/v1.41/containers/json" into "/containers/json".
func stripVersion(p string) (string, bool) {
	if !strings.HasPrefix(p, "/v") {
		return p, false
	}
	i := strings.Index(p[1:], "/")
	if i < 0 {
		return p, false
	}
	return p[1+i:], true
}

// answer returns a handler writing status, content type and body.
func answer(status int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

// frame encodes one frame of the engine's multiplexed stream.
func frame(stream byte, payload string) []byte {
	b := make([]byte, 8, 8+len(payload))
	b[0] = stream
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

// frames concatenates frames.
func frames(fs ...[]byte) []byte {
	var b []byte
	for _, f := range fs {
		b = append(b, f...)
	}
	return b
}

// sentinels are every sentinel *Error may match, by name.
var sentinels = map[string]error{
	"ErrBadRequest":  dockerapi.ErrBadRequest,
	"ErrForbidden":   dockerapi.ErrForbidden,
	"ErrNotFound":    dockerapi.ErrNotFound,
	"ErrConflict":    dockerapi.ErrConflict,
	"ErrNotRunning":  dockerapi.ErrNotRunning,
	"ErrNotModified": dockerapi.ErrNotModified,
	"ErrEngine":      dockerapi.ErrEngine,
}

// checkSentinels fails t unless err matches exactly the sentinels named in
// want.
func checkSentinels(t *testing.T, err error, want ...string) {
	t.Helper()
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
	}
	for name, s := range sentinels {
		if got := errors.Is(err, s); got != wanted[name] {
			t.Errorf("errors.Is(%v, %s) = %v; want %v", err, name, got, wanted[name])
		}
	}
}
