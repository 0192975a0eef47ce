// Command stockade-gate is the egress gate of NetLimited sessions: an HTTP
// forward proxy that admits only the session's allowed hosts (package
// internal/gate has the logic, the threat model and the protocol). The
// backend runs it as the main process of the session's gate container:
//
//	stockade-gate          serve proxy requests on port 3128 of its address on its session's side
//	                       (configuration from the environment; STOCKADE_GATE_LISTEN and
//	                       STOCKADE_GATE_CONTROL move the proxy and the control socket)
//	stockade-gate ready    exit 0 when the gate in this container serves
//	stockade-gate log      print the egress record (JSON) of the gate in this container
//
// With STOCKADE_GATE_OTEL it exports a span per request and counters over
// OTLP/HTTP (internal/gate/telemetry), and flushes them within
// telemetry.ShutdownBudget when SIGTERM stops it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stockade/stockade/internal/gate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || args[0] == "serve":
		if err := serve(ctx, getenv, stderr); err != nil {
			fmt.Fprintln(stderr, "stockade-gate:", err)
			return 1
		}
		return 0
	case len(args) == 1 && (args[0] == gate.CmdReady || args[0] == gate.CmdLog):
		st := gate.Settings{Control: getenv(gate.EnvControl)}
		if err := gate.Ask(ctx, st.ControlOr(), args[0], stdout); err != nil {
			fmt.Fprintln(stderr, "stockade-gate:", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintln(stderr, "usage: stockade-gate [serve | ready | log]")
		return 2
	}
}

func serve(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	st, err := gate.FromEnv(getenv)
	if err != nil {
		return err
	}
	own, err := ownAddrs()
	if err != nil {
		return err
	}
	// The gate's own addresses are the host's as much as the engine's are:
	// a name leading there would have the gate dial itself.
	for _, a := range own {
		st.Policy.HostAddrs = append(st.Policy.HostAddrs, netip.PrefixFrom(a, a.BitLen()))
	}
	listen, err := st.ListenOn(own)
	if err != nil {
		return err
	}
	cfg := gate.Config{Policy: st.Policy, Logger: logger, Clients: st.Clients}
	if st.Controlplane != "" {
		if cfg.Credentials, err = gate.FetchCredentials(ctx, http.DefaultClient, st.Controlplane, st.Session, st.Token); err != nil {
			return err
		}
	}
	stopTelemetry, err := startTelemetry(ctx, st, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	s := gate.New(cfg)
	pl, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// The control socket opens after the proxy listens: "ready" then means
	// the proxy takes connections.
	if c := st.ControlOr(); !strings.HasPrefix(c, "@") {
		// A path socket outlives a gate that died: the restarted gate
		// takes its place (only the gate's own directory holds it).
		if err := os.Remove(c); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	cl, err := net.Listen("unix", st.ControlOr())
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- s.Serve(ctx, pl) }()
	go func() { errc <- s.ServeControl(ctx, cl) }()
	return <-errc
}

// ownAddrs returns the addresses of the gate's interfaces.
func ownAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("the gate's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}
