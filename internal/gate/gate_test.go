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
	"unicode/utf8"
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
	host := []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("172.30.0.1/32"), netip.MustParsePrefix("2001:db8::2/128")}
	p := Policy{Private: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("0.0.0.0/0")}, HostAddrs: host}
	strict := Policy{HostAddrs: host}
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
		// The engine host's addresses, public or in an admitted range.
		{"192.0.2.2", false, false},
		{"::ffff:192.0.2.2", false, false},
		{"192.0.2.3", true, true},
		{"172.30.0.1", false, false},
		{"2001:db8::2", false, false},
		{"2001:db8::3", true, true},
	} {
		a := netip.MustParseAddr(tc.addr)
		if err := strict.AllowAddr(a); (err == nil) != tc.strict || (err != nil && !errors.Is(err, ErrAddress)) {
			t.Errorf("strict AllowAddr(%s) = %v; want admitted=%v", a, err, tc.strict)
		}
		if err := p.AllowAddr(a); (err == nil) != tc.loose {
			t.Errorf("AllowAddr(%s) with private ranges = %v; want admitted=%v", a, err, tc.loose)
		}
	}
	if err := p.AllowAddr(netip.MustParseAddr("172.30.0.1")); err == nil || !strings.Contains(err.Error(), "engine's host") {
		t.Errorf("AllowAddr(a host address) = %v; want the reason to name the host", err)
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

// slowDNS answers as r does after d (or ctx's end), as a real resolver
// takes time; testGate fills in r.
type slowDNS struct {
	d time.Duration
	r Resolver
}

func (s slowDNS) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	select {
	case <-time.After(s.d):
		return s.r.LookupNetIP(ctx, network, host)
	case <-ctx.Done():
		return nil, &net.DNSError{Err: ctx.Err().Error(), Name: host}
	}
}

// testGate runs a gate of cfg (its Credentials and OnRecord, and a
// slowDNS as its Resolver; the rest is the fixture's) whose public addresses all lead to upstream (an httptest
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
	var res Resolver = dns
	if slow, ok := cfg.Resolver.(slowDNS); ok {
		slow.r = dns
		res = slow
	}
	log = NewLog(4)
	s := New(Config{
		Policy:      Policy{Allowed: []string{"allowed.test", "*.allowed.test"}},
		Log:         log,
		Resolver:    res,
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
	d := log.Snapshot()
	for deadline := time.Now().Add(5 * time.Second); int64(len(d.Records))+d.Dropped < 7 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		d = log.Snapshot()
	}
	recs, dropped := d.Records, d.Dropped
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
	recs := log.Snapshot().Records
	if len(recs) == 0 || recs[0].Method != "CONNECT" {
		t.Fatalf("records %+v", recs)
	}
}

// TestHalfClosedClient: a client may close its sending side once its
// request is sent (busybox nc does, at the end of its input); the gate
// still resolves, dials and answers, for plain HTTP and CONNECT.
func TestHalfClosedClient(t *testing.T) {
	proxy, _, _ := testGate(t, Config{Resolver: slowDNS{d: 200 * time.Millisecond}})
	for _, req := range []string{
		"GET http://allowed.test/half HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n",
	} {
		c, err := net.Dial("tcp", proxy.Host)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 200 ") {
			t.Errorf("%q, then the client's end of sending: %q; want 200", strings.Fields(req)[:2], b)
		}
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
	in := Settings{Policy: Policy{Allowed: []string{"a.test", "*.b.test"}, Private: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		HostAddrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("2001:db8::2/128")}}, Session: "s1", Token: "tok",
		OTel: "http://10.1.2.3:4318", OTelInsecure: true, Clients: []netip.Prefix{netip.MustParsePrefix("10.213.0.16/28")}}
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
	for _, env := range []map[string]string{{EnvClients: "10.0.0.1"}, {EnvHostAddrs: "host"}} {
		if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
			t.Errorf("FromEnv(%v) accepted it", env)
		}
	}
	// The endpoint is judged with the ranges the environment admits and
	// the host's addresses it refuses.
	for _, env := range []map[string]string{
		{EnvOTel: "http://collector.test:4318"},
		{EnvOTel: "http://10.1.2.3:4318", EnvOTelInsecure: "1"},
		{EnvOTel: "http://127.0.0.1:4318", EnvOTelInsecure: "1", EnvPrivate: "0.0.0.0/0"},
		{EnvOTel: "http://10.1.2.3:4318", EnvOTelInsecure: "1", EnvPrivate: "10.0.0.0/8", EnvHostAddrs: "10.1.2.3/32"},
	} {
		if _, err := FromEnv(func(k string) string { return env[k] }); !errors.Is(err, ErrOTelEndpoint) {
			t.Errorf("FromEnv(%v) = %v; want ErrOTelEndpoint", env, err)
		}
	}
}

func TestListenOn(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.18.0.5"), netip.MustParseAddr("10.213.0.18")}
	clients := []netip.Prefix{netip.MustParsePrefix("10.213.0.16/28")}
	for _, tc := range []struct {
		s    Settings
		want string
		err  error
	}{
		{Settings{Clients: clients}, "10.213.0.18:3128", nil},
		{Settings{}, "127.0.0.1:3128", nil},
		{Settings{Listen: "127.0.0.1:3128", Clients: clients}, "127.0.0.1:3128", nil},
		{Settings{Clients: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}, "", ErrNoClientSide},
	} {
		if got, err := tc.s.ListenOn(own); got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%+v.ListenOn = %q, %v; want %q, %v", tc.s, got, err, tc.want, tc.err)
		}
	}
}

// TestServeClientsOnly: Serve answers loopback and its clients' ranges,
// and closes a connection from anywhere else unserved and unrecorded.
func TestServeClientsOnly(t *testing.T) {
	var outside netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			outside = p.Addr()
			break
		}
	}
	if !outside.IsValid() {
		t.Skip("no IPv4 address but loopback to connect from")
	}
	for _, tc := range []struct {
		name    string
		from    netip.Addr
		clients []netip.Prefix
		served  bool
	}{
		{"loopback", netip.MustParseAddr("127.0.0.1"), nil, true},
		{"outside, no clients", outside, nil, false},
		{"outside, not a client", outside, []netip.Prefix{netip.MustParsePrefix("10.213.0.16/28")}, false},
		{"a client", outside, []netip.Prefix{netip.PrefixFrom(outside, 32)}, true},
	} {
		log := NewLog(0)
		s := New(Config{Log: log, Clients: tc.clients})
		l, err := net.Listen("tcp4", netip.AddrPortFrom(tc.from, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, l) }()
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(tc.from, 0)), Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if served := strings.Contains(string(b), " 403 "); served != tc.served {
			t.Errorf("%s: a request from %s got %q; want served=%v", tc.name, tc.from, b, tc.served)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Serve = %v", tc.name, err)
		}
		if n := len(log.Snapshot().Records); n != map[bool]int{true: 1, false: 0}[tc.served] {
			t.Errorf("%s: %d records", tc.name, n)
		}
	}
}

// TestLogBounds: a record keeps each field to MaxFieldBytes, and the log
// counts the records it cut.
func TestLogBounds(t *testing.T) {
	log := NewLog(2)
	huge := strings.Repeat("a", 1<<20)
	for _, r := range []Record{
		{Method: "GET", Host: huge, Reason: "not a proxy request: " + huge, Verdict: Invalid},
		{Method: "GET", Host: "allowed.test"},
		{Method: strings.Repeat("M", 300), Host: "x\x00y\xff\nz"},
		{Host: strings.Repeat("é", 200)},
	} {
		got := log.Add(r)
		for _, f := range []string{got.Method, got.Host, got.Reason} {
			if len(f) > MaxFieldBytes || !utf8.ValidString(f) {
				t.Errorf("Add returned a field of %d bytes (valid UTF-8: %v)", len(f), utf8.ValidString(f))
			}
		}
	}
	d := log.Snapshot()
	if d.Dropped != 2 || d.Truncated != 3 || len(d.Records) != 2 {
		t.Fatalf("Snapshot: %d records, %d dropped, %d truncated; want 2, 2, 3", len(d.Records), d.Dropped, d.Truncated)
	}
	if h := d.Records[0].Host; h != "x?y??z" {
		t.Errorf("control characters and invalid UTF-8 kept as %q; want each one '?'", h)
	}
	if h := d.Records[1].Host; len(h) != MaxFieldBytes || h != strings.Repeat("é", MaxFieldBytes/2) {
		t.Errorf("a cut host of 2-byte characters: %d bytes", len(h))
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
