package loopback

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// get fetches url and checks the greeting.
func get(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("GET %s = %q, %v", url, b, err)
	}
}

// serve serves Handler on a listener of network at addr and returns its
// port.
func serve(t *testing.T, network, addr string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: http.HandlerFunc(Handler)}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// httptest's server listens on 127.0.0.1.
func TestHTTPTest(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(Handler))
	defer s.Close()
	get(t, s.URL)
}

// A test that names localhost, as go-chi's and golang-jwt's do.
func TestLocalhost(t *testing.T) {
	get(t, "http://localhost:"+serve(t, "tcp", "localhost:0"))
}

func TestIPv6Loopback(t *testing.T) {
	get(t, "http://[::1]:"+serve(t, "tcp6", "[::1]:0"))
}

// A listener on every interface, reached through localhost.
func TestUnspecified(t *testing.T) {
	get(t, "http://localhost:"+serve(t, "tcp4", "0.0.0.0:0"))
}
