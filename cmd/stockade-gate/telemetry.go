package main

import (
	"context"
	"errors"

	"github.com/stockade/stockade/internal/gate"
)

// errNoTelemetry refuses an OTLP endpoint: this gate does not export yet,
// and a gate that silently drops what was asked of it would lie.
var errNoTelemetry = errors.New("OTLP export is not built into this gate")

// telemetry sets up export for st.OTel; without an endpoint it does nothing.
func telemetry(_ context.Context, st gate.Settings, _ *gate.Config) (stop func(), err error) {
	if st.OTel != "" {
		return nil, errNoTelemetry
	}
	return func() {}, nil
}
