package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestAllowHost(t *testing.T) {
	p := Policy{Allowed: []string{"allowed.test", "*.Example.COM", "10.0.0.5"}}
	for _, tc := range []struct {
		host string
		want error
	}{
		{"allowed.test", nil},
		{"ALLOWED.Test", nil},
		{"a.example.com", nil},
		{"a.b.example.com", nil},
		{"example.com", ErrHostNotAllowed},
		{"badexample.com", ErrHostNotAllowed},
		{"allowed.test.", ErrBadHost},
		{"allowed.test.evil", ErrHostNotAllowed},
		{"sub.allowed.test", ErrHostNotAllowed},
		{"аllowed.test", ErrBadHost}, // Cyrillic а
		{"xn--llowed-3ve.test", ErrHostNotAllowed},
		{"allowed%2etest", ErrBadHost},
		{"", ErrBadHost},
		{"a..example.com", ErrBadHost},
		{"10.0.0.5", nil},
		{"10.0.0.6", ErrHostNotAllowed},
		{"fe80::1%eth0", ErrBadHost},
	} {
		if err := p.AllowHost(tc.host); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("AllowHost(%q) = %v; want %v", tc.host, err, tc.want)
		}
	}
	if err := (Policy{}).AllowHost("allowed.test"); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("zero Policy admits a host: %v", err)
	}
	if err := (Policy{AnyHost: true}).AllowHost("any.where"); err != nil {
		t.Errorf("AnyHost refuses: %v", err)
	}
}

func TestAllowAddr(t *testing.T) {
	p := Policy{Private: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("0.0.0.0/0")}}
	strict := Policy{}
	for _, tc := range []struct {
		addr          string
		strict, loose bool // admitted by strict, by p
	}{
		{"93.184.216.34", true, true},
		{"127.0.0.1", false, false},
		{"127.1.2.3", false, false},
		{"::1", false, false},
		{"::ffff:127.0.0.1", false, false},
		{"169.254.169.254", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"0.1.2.3", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"255.255.255.255", false, false},
		{"10.1.2.3", false, true},
		{"172.30.5.5", false, true},
		{"192.168.1.1", false, true},
		{"100.100.100.200", false, true},
		{"fd00::1", false, false}, // IPv6 private is not in p's IPv4 ranges
	} {
		a := netip.MustParseAddr(tc.addr)
		if err := strict.AllowAddr(a); (err == nil) != tc.strict || (err != nil && !errors.Is(err, ErrAddress)) {
			t.Errorf("strict AllowAddr(%s) = %v; want admitted=%v", a, err, tc.strict)
		}
		if err := p.AllowAddr(a); (err == nil) != tc.loose {
			t.Errorf("AllowAddr(%s) with private ranges = %v; want admitted=%v", a, err, tc.loose)
		}
	}
}

// fakeDNS resolves from a map.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// testGate runs a gate of cfg (its Credentials and OnRecord; the rest is
// the fixture's) whose public addresses all lead to upstream (an httptest
// server on loopback, which the policy would refuse).
func testGate(t testing.TB, cfg Config) (proxy *url.URL, log *Log, upstream *httptest.Server) {
	upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s auth=%s path=%s", r.Host, r.Header.Get("Authorization"), r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	pub := netip.MustParseAddr("203.0.113.7")
	dns := fakeDNS{
		"allowed.test":       {pub},
		"sub.allowed.test":   {pub},
		"denied.test":        {pub},
		"loop.allowed.test":  {netip.MustParseAddr("127.0.0.1")},
		"meta.allowed.test":  {netip.MustParseAddr("169.254.169.254")},
		"mixed.allowed.test": {netip.MustParseAddr("10.0.0.1"), pub},
	}
	log = NewLog(4)
	s := New(Config{
		Policy:      Policy{Allowed: []string{"allowed.test", "*.allowed.test"}},
		Log:         log,
		Resolver:    dns,
		Credentials: cfg.Credentials,
		OnRecord:    cfg.OnRecord,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !strings.HasPrefix(addr, pub.String()+":") {
				return nil, fmt.Errorf("dialled unvetted %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, upstream.Listener.Addr().String())
		},
	})
	ps := httptest.NewServer(s)
	t.Cleanup(ps.Close)
	u, _ := url.Parse(ps.URL)
	return u, log, upstream
}

func TestProxy(t *testing.T) {
	proxy, log, _ := testGate(t, Config{Credentials: []Credential{{Placeholder: "PLACEHOLDER_1", Value: "Bearer real", Hosts: []string{"allowed.test"}}}})
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	for _, tc := range []struct {
		url    string
		status int
		body   string
	}{
		{"http://allowed.test/x", 200, "host=allowed.test auth=Bearer real path=/x"},
		{"http://SUB.allowed.test:80/y", 200, "host=SUB.allowed.test:80 auth=PLACEHOLDER_1 path=/y"},
		{"http://denied.test/", 403, "host not allowed"},
		{"http://loop.allowed.test/", 403, "loopback"},
		{"http://meta.allowed.test/", 403, "link-local"},
		{"http://mixed.allowed.test/", 200, "path=/"},
		{"http://nx.allowed.test/", 502, "no such host"},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		req.Header.Set("Authorization", "PLACEHOLDER_1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
			t.Errorf("GET %s = %d %q; want %d containing %q", tc.url, resp.StatusCode, b, tc.status, tc.body)
		}
	}
	// The ring keeps the last 4 requests to end, sorted by arrival. A
	// request is recorded when its handler ends, which may be just after
	// the client read its whole answer.
	recs, dropped := log.Snapshot()
	for deadline := time.Now().Add(5 * time.Second); int64(len(recs))+dropped < 7 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		recs, dropped = log.Snapshot()
	}
	if len(recs) != 4 || dropped != 3 {
		t.Fatalf("log holds %d records, dropped %d; want 4, 3 dropped: %+v", len(recs), dropped, recs)
	}
	want := map[string]string{"allowed.test": Allowed, "SUB.allowed.test": Allowed, "denied.test": Refused, "loop.allowed.test": Refused,
		"meta.allowed.test": Refused, "mixed.allowed.test": Allowed, "nx.allowed.test": Failed}
	for i, r := range recs {
		if want[r.Host] != r.Verdict || i > 0 && r.Time.Before(recs[i-1].Time) {
			t.Errorf("record %d %+v; want verdict %q, oldest first", i, r, want[r.Host])
		}
		if r.Verdict == Allowed && (r.Addr != "203.0.113.7:80" || r.BytesDn == 0) {
			t.Errorf("allowed record %+v; want the vetted address and bytes", r)
		}
		if r.Verdict == Refused && r.Reason == "" {
			t.Errorf("refused record %+v has no reason", r)
		}
	}
}

func TestConnect(t *testing.T) {
	proxy, log, _ := testGate(t, Config{})
	for _, tc := range []struct {
		target string
		status string
	}{
		{"allowed.test:443", "200"},
		{"denied.test:443", "403"},
		{"allowed.test.:443", "403"},
		{"meta.allowed.test:80", "403"},
		{"allowed.test", "400"},
	} {
		c, err := net.Dial("tcp", proxy.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /tunnel HTTP/1.0\r\nHost: t\r\n\r\n", tc.target, tc.target)
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		if !strings.Contains(line, " "+tc.status+" ") {
			t.Errorf("CONNECT %s: %q; want %s", tc.target, line, tc.status)
		}
		if tc.status == "200" {
			rest, _ := io.ReadAll(br)
			if !strings.Contains(string(rest), "path=/tunnel") {
				t.Errorf("tunnel answered %q", rest)
			}
		}
		c.Close()
	}
	recs, _ := log.Snapshot()
	if len(recs) == 0 || recs[0].Method != "CONNECT" {
		t.Fatalf("records %+v", recs)
	}
}

func TestNotAProxyRequest(t *testing.T) {
	proxy, _, _ := testGate(t, Config{})
	resp, err := http.Get(proxy.String() + "/direct")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("origin-form request = %d; want 400", resp.StatusCode)
	}
}

func TestEnvRoundTrip(t *testing.T) {
	in := Settings{Policy: Policy{Allowed: []string{"a.test", "*.b.test"}, Private: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, Session: "s1", Token: "tok",
		OTel: "http://10.1.2.3:4318", OTelInsecure: true}
	env := in.Env()
	out, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("FromEnv(Env()) = %+v; want %+v", out, in)
	}
	if _, err := FromEnv(func(k string) string { return map[string]string{EnvAllow: "a.test."}[k] }); err == nil {
		t.Error("FromEnv accepted a trailing-dot host")
	}
	// The endpoint is judged with the ranges the environment admits.
	for _, env := range []map[string]string{
		{EnvOTel: "http://collector.test:4318"},
		{EnvOTel: "http://10.1.2.3:4318", EnvOTelInsecure: "1"},
		{EnvOTel: "http://127.0.0.1:4318", EnvOTelInsecure: "1", EnvPrivate: "0.0.0.0/0"},
	} {
		if _, err := FromEnv(func(k string) string { return env[k] }); !errors.Is(err, ErrOTelEndpoint) {
			t.Errorf("FromEnv(%v) = %v; want ErrOTelEndpoint", env, err)
		}
	}
}

func TestFetchCredentials(t *testing.T) {
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Stockade-Session") != "s1" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"credentials":[{"placeholder":"PLACEHOLDER","value":"v","hosts":["a.test"]}]}`)
	}))
	defer cp.Close()
	cs, err := FetchCredentials(context.Background(), cp.Client(), cp.URL, "s1", "tok")
	if err != nil || len(cs) != 1 || cs[0].Value != "v" {
		t.Errorf("FetchCredentials = %v, %v", cs, err)
	}
	if _, err := FetchCredentials(context.Background(), cp.Client(), cp.URL, "s1", "wrong"); err == nil {
		t.Error("FetchCredentials with a wrong token succeeded")
	}
}
