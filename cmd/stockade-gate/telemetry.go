package main

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel"

	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/gate/telemetry"
)

// startTelemetry exports cfg's records to st.OTel (the collector's
// addresses obey st's address rules); without an endpoint it does
// nothing. stop flushes within telemetry.ShutdownBudget, even after ctx
// ended (SIGTERM).
func startTelemetry(ctx context.Context, st gate.Settings, cfg *gate.Config, logger *slog.Logger) (stop func(), err error) {
	if st.OTel == "" {
		return func() {}, nil
	}
	exp, err := telemetry.Start(ctx, telemetry.Config{
		Endpoint: st.OTel, Insecure: st.OTelInsecure, Session: st.Session,
		Policy: gate.Policy{Private: st.Policy.Private, HostAddrs: st.Policy.HostAddrs}, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	// The SDK reports failed exports here, not to the proxy.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("telemetry", "err", err) }))
	cfg.OnRecord = exp.Record
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetry.ShutdownBudget)
		defer cancel()
		if err := exp.Shutdown(ctx); err != nil {
			logger.Warn("telemetry: flush at shutdown", "err", err)
		}
	}, nil
}
