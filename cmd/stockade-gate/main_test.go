package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/gate/otlptest"
	"github.com/stockade/stockade/internal/gate/telemetry"
)

func TestRun(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"usage", []string{"bogus"}, nil, 2, "usage"},
		{"bad allowed host", nil, map[string]string{gate.EnvAllow: "allowed.test."}, 1, "malformed host"},
		{"bad private range", nil, map[string]string{gate.EnvPrivate: "10.0.0.0"}, 1, gate.EnvPrivate},
		{"plain-HTTP telemetry without insecure", nil, map[string]string{gate.EnvOTel: "http://collector:4318"}, 1, "bad OTLP endpoint"},
		{"telemetry to loopback", nil, map[string]string{gate.EnvOTel: "http://127.0.0.1:4318", gate.EnvOTelInsecure: "1"}, 1, "loopback"},
		{"no address on its clients' side", nil, map[string]string{gate.EnvClients: "198.51.100.240/28"}, 1, "clients' ranges"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, env(tc.env), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: run = %d, %q; want %d and %q", tc.name, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// hostAddr is an address of this machine that is not loopback (which the
// collector may never be).
func hostAddr(t *testing.T) netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	t.Skip("no IPv4 address but loopback to put a collector on")
	return netip.Addr{}
}

// TestTelemetryFlushOnStop: what the gate recorded reaches the collector
// when it stops, although its context ended (SIGTERM) and the batch's
// timeout has not come.
func TestTelemetryFlushOnStop(t *testing.T) {
	a := hostAddr(t)
	l, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	r := &otlptest.Receiver{}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: r}}
	srv.Start()
	defer srv.Close()
	st := gate.Settings{OTel: srv.URL, OTelInsecure: true, Session: "s-stop",
		Policy: gate.Policy{Private: []netip.Prefix{netip.PrefixFrom(a, 32)}}}
	ctx, cancel := context.WithCancel(context.Background())
	var cfg gate.Config
	stop, err := startTelemetry(ctx, st, &cfg, slog.New(slog.DiscardHandler))
	if err != nil || cfg.OnRecord == nil {
		t.Fatalf("startTelemetry = %v, OnRecord set %v", err, cfg.OnRecord != nil)
	}
	cfg.OnRecord(gate.Record{Time: time.Now().UTC(), Method: "GET", Host: "allowed.test", Port: "80", Verdict: gate.Allowed, Status: 200})
	cancel()
	stop()
	d := r.Dump()
	if len(d.Spans) != 1 || d.Spans[0].Str["server.address"] != "allowed.test" || d.Spans[0].Resource["stockade.session.id"] != "s-stop" {
		t.Errorf("after stop the collector holds %+v; want the one span of session s-stop", d.Spans)
	}
	if _, ok := d.Counter("stockade.gate.requests", map[string]string{"stockade.gate.verdict": "allowed"}); !ok {
		t.Errorf("after stop the collector has no request counter: %+v", d.Points)
	}
}

// TestStopLeavesRoomToFlush: a stop of the gate container waits longer
// than the gate's flush before it kills.
func TestStopLeavesRoomToFlush(t *testing.T) {
	if stop := time.Duration(container.GateStopSeconds) * time.Second; stop <= telemetry.ShutdownBudget {
		t.Errorf("container.GateStopSeconds = %v; want more than telemetry.ShutdownBudget (%v)", stop, telemetry.ShutdownBudget)
	}
}
