package gate_test

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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/gate/otlptest"
	"github.com/stockade/stockade/internal/gate/telemetry"
)

// collectorPublic is the collector's address in the tests' DNS: public, so
// the address rules admit it; the dial then leads to a loopback server.
var collectorPublic = netip.MustParseAddr("203.0.113.9")

// collectorDNS names the collector by several addresses.
var collectorDNS = gate.FakeDNS{
	"collector.test": {collectorPublic},
	"loop.test":      {netip.MustParseAddr("127.0.0.1")},
	"meta.test":      {netip.MustParseAddr("169.254.169.254")},
	"private.test":   {netip.MustParseAddr("10.9.0.1")},
}

// collector is an exporter whose every vetted dial leads to srv; dialled
// records the addresses it was asked for.
type collector struct {
	exp      *telemetry.Exporter
	mu       sync.Mutex
	got      []string
	returned atomic.Int64 // record calls that returned
}

// record is the gate's OnRecord: the exporter's, counted. The gate logs a
// record before it calls OnRecord, and the client has its answer before
// either, so only this count says the exporter has it.
func (c *collector) record(r gate.Record) {
	c.exp.Record(r)
	c.returned.Add(1)
}

// waitRecorded waits until n records went through record, or fails.
func (c *collector) waitRecorded(t testing.TB, n int64, why string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.returned.Load() < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.returned.Load(); got != n {
		t.Fatalf("%d of %d records were exported %s; the others are stuck in telemetry", got, n, why)
	}
}

func (c *collector) dialled() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func startExporter(t testing.TB, srv *httptest.Server, endpoint string, p gate.Policy, lim telemetry.Limits) *collector {
	t.Helper()
	c := &collector{}
	exp, err := telemetry.Start(context.Background(), telemetry.Config{
		Endpoint: endpoint, Insecure: strings.HasPrefix(endpoint, "http:"), Session: "s-otel", Policy: p,
		Resolver: collectorDNS, Limits: lim,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.mu.Lock()
			c.got = append(c.got, addr)
			c.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.exp = exp
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		exp.Shutdown(ctx)
	})
	return c
}

// connect sends a CONNECT for target through proxy and returns the
// status line.
func connect(t *testing.T, proxy *url.URL, target string) string {
	t.Helper()
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// records waits until log holds n records (a request is recorded as its
// handler ends, which may be just after the client has its answer).
func records(t *testing.T, log *gate.Log, n int) []gate.Record {
	t.Helper()
	recs := log.Snapshot().Records
	for deadline := time.Now().Add(10 * time.Second); len(recs) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		recs = log.Snapshot().Records
	}
	if len(recs) != n {
		t.Fatalf("log holds %d records; want %d: %+v", len(recs), n, recs)
	}
	return recs
}

// TestTelemetryExport runs an allowed GET and a refused CONNECT through a
// gate that exports to an OTLP receiver, and checks the receiver holds a
// span per record carrying the record, and the counters.
func TestTelemetryExport(t *testing.T) {
	r := &otlptest.Receiver{}
	srv := httptest.NewServer(http.StripPrefix("/otlp", r))
	defer srv.Close()
	col := startExporter(t, srv, "http://collector.test:4318/otlp", gate.Policy{}, telemetry.Limits{})
	proxy, log, _ := gate.TestGate(t, gate.Config{OnRecord: col.record})

	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 30 * time.Second}
	resp, err := client.Get("http://allowed.test/x")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if line := connect(t, proxy, "denied.test:443"); !strings.Contains(line, " 403 ") {
		t.Fatalf("CONNECT denied.test:443 = %q; want 403", line)
	}
	recs := records(t, log, 2)
	col.waitRecorded(t, 2, "")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := col.exp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	d := r.Dump()
	if len(d.Errors) != 0 || len(d.Spans) != 2 {
		t.Fatalf("receiver got %d spans, errors %v; want 2 spans: %+v", len(d.Spans), d.Errors, d.Spans)
	}
	for _, a := range col.dialled() {
		if a != "203.0.113.9:4318" {
			t.Errorf("the exporter dialled %s; want only the collector's vetted address", a)
		}
	}
	var up, down int64
	for _, rec := range recs {
		up, down = up+rec.BytesUp, down+rec.BytesDn
		var sp *otlptest.Span
		for i := range d.Spans {
			if d.Spans[i].Str["server.address"] == rec.Host {
				sp = &d.Spans[i]
			}
		}
		if sp == nil {
			t.Errorf("no span for record %+v", rec)
			continue
		}
		wantStr := map[string]string{"http.request.method": rec.Method, "server.address": rec.Host, "stockade.gate.verdict": rec.Verdict}
		wantInt := map[string]int64{"http.response.status_code": int64(rec.Status), "stockade.gate.bytes_up": rec.BytesUp, "stockade.gate.bytes_down": rec.BytesDn}
		status := "unset"
		switch rec.Verdict {
		case gate.Allowed:
			wantStr["network.peer.address"] = "203.0.113.7"
			wantInt["server.port"], wantInt["network.peer.port"] = 80, 80
			if rec.Method != "GET" || rec.BytesDn == 0 {
				t.Errorf("allowed record %+v; want the GET with its answer", rec)
			}
		case gate.Refused:
			wantStr["stockade.gate.reason"] = rec.Reason
			wantInt["server.port"] = 443
			status = "error"
			if rec.Method != "CONNECT" || !strings.Contains(rec.Reason, "host not allowed") {
				t.Errorf("refused record %+v; want the CONNECT, host not allowed", rec)
			}
		default:
			t.Errorf("record %+v; want allowed or refused", rec)
		}
		if fmt.Sprint(sp.Str) != fmt.Sprint(wantStr) || fmt.Sprint(sp.Int) != fmt.Sprint(wantInt) {
			t.Errorf("span of %s: attributes %v %v; want %v %v", rec.Host, sp.Str, sp.Int, wantStr, wantInt)
		}
		if sp.Name != rec.Method || sp.Kind != "client" || sp.Status != status || sp.Scope != telemetry.Scope {
			t.Errorf("span of %s: name %q kind %q status %q scope %q; want %q client %q %q", rec.Host, sp.Name, sp.Kind, sp.Status, sp.Scope, rec.Method, status, telemetry.Scope)
		}
		if !sp.Start.Equal(rec.Time) || sp.End.Sub(sp.Start) != rec.Duration {
			t.Errorf("span of %s: %v for %v; want the record's %v for %v", rec.Host, sp.Start, sp.End.Sub(sp.Start), rec.Time, rec.Duration)
		}
		if sp.Resource["service.name"] != "stockade-gate" || sp.Resource["stockade.session.id"] != "s-otel" {
			t.Errorf("span resource %v; want service.name stockade-gate, stockade.session.id s-otel", sp.Resource)
		}
	}
	for _, tc := range []struct {
		metric string
		attrs  map[string]string
		want   int64
	}{
		{telemetry.RequestsMetric, map[string]string{"stockade.gate.verdict": "allowed"}, 1},
		{telemetry.RequestsMetric, map[string]string{"stockade.gate.verdict": "refused"}, 1},
		{telemetry.BytesMetric, map[string]string{"stockade.gate.direction": "up"}, up},
		{telemetry.BytesMetric, map[string]string{"stockade.gate.direction": "down"}, down},
	} {
		if got, ok := d.Counter(tc.metric, tc.attrs); !ok || got != tc.want {
			t.Errorf("counter %s%v = %d (found %v); want %d", tc.metric, tc.attrs, got, ok, tc.want)
		}
	}
	for _, p := range d.Points {
		wantUnit := map[string]string{telemetry.RequestsMetric: "{request}", telemetry.BytesMetric: "By"}[p.Metric]
		if p.Unit != wantUnit || !p.Monotonic || !p.Cumulative || p.Resource["stockade.session.id"] != "s-otel" {
			t.Errorf("point %+v; want a cumulative monotonic sum of unit %q of the session", p, wantUnit)
		}
	}
}

// TestTelemetryCollectorDown: with a collector that holds every export
// (and one that is not there), requests through the gate go on as if
// there were none, and Shutdown keeps to its budget.
func TestTelemetryCollectorDown(t *testing.T) {
	const requests = 40
	for _, tc := range []struct {
		name string
		hang bool
	}{{"hanging", true}, {"dead", false}} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			arrived := make(chan struct{}, 1000)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-release
			}))
			defer srv.Close()
			defer close(release)
			if !tc.hang {
				srv.Listener.Close() // every dial is refused
			}
			// A tiny queue and batch, so spans are dropped, and an export
			// timeout far longer than the test: an export in flight stays
			// in flight.
			col := startExporter(t, srv, "http://collector.test:4318", gate.Policy{},
				telemetry.Limits{QueueSpans: 4, BatchSpans: 1, BatchTimeout: time.Millisecond, ExportTimeout: time.Hour, MetricInterval: time.Millisecond})
			proxy, _, _ := gate.TestGate(t, gate.Config{OnRecord: col.record})
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 30 * time.Second}
			get := func(i int) {
				resp, err := client.Get(fmt.Sprintf("http://allowed.test/%d", i))
				if err != nil {
					t.Fatalf("request %d with the collector %s: %v", i, tc.name, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			get(0)
			if tc.hang {
				// The first export is now held by the collector, and
				// stays held until the test ends.
				select {
				case <-arrived:
				case <-time.After(30 * time.Second):
					t.Fatal("no export reached the hanging collector")
				}
			}
			for i := 1; i < requests; i++ {
				get(i)
			}
			col.waitRecorded(t, requests, "with the collector "+tc.name)
			// Shutdown with a dead collector ends with its budget.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- col.exp.Shutdown(ctx) }()
			select {
			case err := <-done:
				t.Logf("Shutdown with the collector %s: %v", tc.name, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Shutdown did not keep to its budget")
			}
		})
	}
}

// TestTelemetryCollectorAddress: the collector's addresses obey the
// address rules; a refused one is never dialled and gets nothing.
func TestTelemetryCollectorAddress(t *testing.T) {
	private := gate.Policy{Private: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}
	for _, tc := range []struct {
		endpoint string
		policy   gate.Policy
		dialled  string // "" for never
	}{
		{"http://collector.test:4318", gate.Policy{}, "203.0.113.9:4318"},
		{"http://loop.test:4318", private, ""},
		{"http://meta.test:4318", private, ""},
		{"http://private.test:4318", gate.Policy{}, ""},
		{"http://private.test:4318", private, "10.9.0.1:4318"},
	} {
		r := &otlptest.Receiver{}
		srv := httptest.NewServer(r)
		col := startExporter(t, srv, tc.endpoint, tc.policy, telemetry.Limits{})
		col.exp.Record(gate.Record{Time: time.Now().UTC(), Method: "GET", Host: "allowed.test", Port: "80", Verdict: gate.Allowed, Status: 200})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		col.exp.Shutdown(ctx)
		cancel()
		srv.Close()
		d, dialled := r.Dump(), col.dialled()
		if tc.dialled == "" && (len(dialled) != 0 || d.Requests != 0) {
			t.Errorf("%s with private %v: dialled %v, %d exports received; want none", tc.endpoint, tc.policy.Private, dialled, d.Requests)
		}
		if tc.dialled != "" && (len(dialled) == 0 || dialled[0] != tc.dialled || len(d.Spans) != 1) {
			t.Errorf("%s with private %v: dialled %v, %d spans received; want %s and the span", tc.endpoint, tc.policy.Private, dialled, len(d.Spans), tc.dialled)
		}
	}
}

func TestAddrDialer(t *testing.T) {
	var asked []string
	dial := gate.AddrDialer(gate.Policy{}, collectorDNS, func(_ context.Context, _, addr string) (net.Conn, error) {
		asked = append(asked, addr)
		return nil, errors.New("test dial")
	})
	for _, tc := range []struct {
		addr string
		want error // nil: dialled
	}{
		{"collector.test:4318", nil},
		{"loop.test:4318", gate.ErrAddress},
		{"meta.test:4318", gate.ErrAddress},
		{"private.test:4318", gate.ErrAddress},
		{"127.0.0.1:4318", gate.ErrAddress},
		{"collector.test.:4318", gate.ErrBadHost},
		{"collector.test", gate.ErrBadHost},
	} {
		asked = nil
		_, err := dial(context.Background(), "tcp", tc.addr)
		if tc.want != nil && (!errors.Is(err, tc.want) || len(asked) != 0) {
			t.Errorf("dial %s = %v, dialled %v; want %v and no dial", tc.addr, err, asked, tc.want)
		}
		if tc.want == nil && (len(asked) != 1 || asked[0] != "203.0.113.9:4318") {
			t.Errorf("dial %s dialled %v; want 203.0.113.9:4318", tc.addr, asked)
		}
	}
}

func TestCheckOTelEndpoint(t *testing.T) {
	private := gate.Policy{Private: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}
	for _, tc := range []struct {
		raw      string
		insecure bool
		want     string // "" for refused
	}{
		{"https://collector.test:4318", false, "https://collector.test:4318"},
		{"https://collector.test:4318/", false, "https://collector.test:4318"},
		{"http://collector.test:4318/otlp/", true, "http://collector.test:4318/otlp"},
		{"http://10.9.0.1:4318", true, "http://10.9.0.1:4318"},
		{"HTTPS://Collector.test:443", false, "https://Collector.test:443"},
		{"http://collector.test:4318", false, ""}, // plain HTTP without OTelInsecure
		{"https://collector.test:4318", true, ""}, // OTelInsecure with TLS
		{"https://collector.test", false, ""},     // no port
		{"https://collector.test:0", false, ""},   // port 0
		{"https://collector.test:99999", false, ""},
		{"grpc://collector.test:4317", false, ""},
		{"collector.test:4318", false, ""},
		{"https://user:pw@collector.test:4318", false, ""},
		{"https://tok@collector.test:4318", false, ""},
		{"https://collector.test:4318/?k=v", false, ""},
		{"https://collector.test:4318/#f", false, ""},
		{"https://collector.test.:4318", false, ""},
		{"https://:4318", false, ""},
		{"http://127.0.0.1:4318", true, ""},
		{"http://[::1]:4318", true, ""},
		{"http://169.254.169.254:80", true, ""},
		{"http://10.8.0.1:4318", true, ""}, // private outside the admitted range
		{"https://" + strings.Repeat("a.", 1100) + "test:4318", false, ""},
	} {
		u, err := gate.CheckOTelEndpoint(tc.raw, tc.insecure, private)
		switch {
		case tc.want == "" && !errors.Is(err, gate.ErrOTelEndpoint):
			t.Errorf("CheckOTelEndpoint(%q, %v) = %v, %v; want ErrOTelEndpoint", tc.raw, tc.insecure, u, err)
		case tc.want != "" && (err != nil || u.String() != tc.want):
			t.Errorf("CheckOTelEndpoint(%q, %v) = %v, %v; want %s", tc.raw, tc.insecure, u, err, tc.want)
		}
	}
	for _, raw := range []string{"https://user:secret@collector.test:4318", "https://secret@collector.test:4318", "https://secret@collector.test:4318/%zz"} {
		if _, err := gate.CheckOTelEndpoint(raw, false, private); err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckOTelEndpoint(%q) = %v; want a refusal that does not repeat the secret", raw, err)
		}
	}
	if _, err := gate.CheckOTelEndpoint("http://127.0.0.1:4318", true, private); !errors.Is(err, gate.ErrAddress) {
		t.Errorf("a loopback endpoint = %v; want it to match ErrAddress too", err)
	}
	if _, err := telemetry.Start(context.Background(), telemetry.Config{Endpoint: "http://collector.test:4318"}); !errors.Is(err, gate.ErrOTelEndpoint) {
		t.Errorf("Start with plain HTTP and no Insecure = %v; want ErrOTelEndpoint", err)
	}
}

// BenchmarkTelemetry measures a small GET through the gate without
// telemetry, exporting to a receiver, and exporting to a collector that
// holds every export, interleaved in each iteration so the machine's load
// falls on all three alike; it reports each one's time per request and
// the two ratios to the gate without telemetry.
func BenchmarkTelemetry(b *testing.B) {
	release := make(chan struct{})
	recv := httptest.NewServer(&otlptest.Receiver{})
	defer recv.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release) // before hang.Close, which waits for its handlers
	off, _, _ := gate.TestGate(b, gate.Config{})
	on, _, _ := gate.TestGate(b, gate.Config{OnRecord: startExporter(b, recv, "http://collector.test:4318", gate.Policy{}, telemetry.Limits{}).exp.Record})
	stuck, _, _ := gate.TestGate(b, gate.Config{OnRecord: startExporter(b, hang, "http://collector.test:4318", gate.Policy{},
		telemetry.Limits{ExportTimeout: time.Hour}).exp.Record})
	gates := []*url.URL{off, on, stuck}
	clients := make([]*http.Client, len(gates))
	for i, g := range gates {
		clients[i] = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(g)}, Timeout: 30 * time.Second}
	}
	var spent [3]time.Duration
	b.ResetTimer()
	for b.Loop() {
		for i, c := range clients {
			start := time.Now()
			resp, err := c.Get("http://allowed.test/bench")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			spent[i] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/off")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/export")
	b.ReportMetric(float64(spent[2].Nanoseconds())/n, "ns/hanging")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "export/off")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "hanging/off")
}

// BenchmarkRecord measures what the proxy's goroutine spends on one
// record's telemetry (the span and the counters), with the export queue
// full (a collector that holds every export), the worst case.
func BenchmarkRecord(b *testing.B) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)
	exp := startExporter(b, hang, "http://collector.test:4318", gate.Policy{}, telemetry.Limits{ExportTimeout: time.Hour}).exp
	rec := gate.Record{Time: time.Now().UTC(), Method: "GET", Host: "allowed.test", Port: "80", Addr: "203.0.113.7:80",
		Verdict: gate.Allowed, Status: 200, BytesUp: 10, BytesDn: 1000, Duration: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		exp.Record(rec)
	}
}
