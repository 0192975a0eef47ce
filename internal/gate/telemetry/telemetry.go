// Package telemetry exports the egress gate's records over OTLP/HTTP
// (protobuf) with the OpenTelemetry Go SDK: a span and counter increments
// per request (gate.Config.OnRecord). The names, their units and the
// reasoning are in package internal/gate's documentation (Telemetry) and
// docs/design/gate.md. Only cmd/stockade-gate links this package: the SDK
// stays out of the session library and the CLI.
//
// The export never holds up a request: a span is queued (dropped when the
// queue is full) and a counter is added to in memory; batches leave from
// the SDK's own goroutines, each request bounded by Limits.ExportTimeout,
// so a dead or hanging collector costs the proxy nothing but the spans it
// drops. The collector is dialled by gate.AddrDialer: the address rules
// the proxy applies to the sandbox's destinations apply to it too.
//
// Its tests are internal/gate's telemetry_test.go, beside the gate fixture
// they run requests through, with an otlptest receiver decoding what the
// SDK sends.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockade/stockade/internal/gate"
)

// Names Stockade defines (the rest are OpenTelemetry semantic conventions,
// semconv v1.43.0); see package internal/gate's documentation.
const (
	ServiceName = "stockade-gate"                              // service.name of the resource
	Scope       = "github.com/stockade/stockade/internal/gate" // instrumentation scope

	SessionKey   = attribute.Key("stockade.session.id")      // resource: the session ID
	VerdictKey   = attribute.Key("stockade.gate.verdict")    // allowed, refused, failed, invalid
	ReasonKey    = attribute.Key("stockade.gate.reason")     // why, for anything but allowed
	BytesUpKey   = attribute.Key("stockade.gate.bytes_up")   // client to upstream, bytes
	BytesDownKey = attribute.Key("stockade.gate.bytes_down") // upstream to client, bytes
	DirectionKey = attribute.Key("stockade.gate.direction")  // "up" or "down", on BytesMetric

	RequestsMetric = "stockade.gate.requests" // counter, unit {request}, by VerdictKey
	BytesMetric    = "stockade.gate.bytes"    // counter, unit By, by DirectionKey
)

// Defaults of Limits.
const (
	// DefaultQueueSpans is how many ended spans wait for export; beyond
	// it new spans are dropped (never waited for).
	DefaultQueueSpans = 2048
	// DefaultBatchSpans is the most spans one export request carries.
	DefaultBatchSpans = 512
	// DefaultBatchTimeout is the longest an ended span waits for its batch.
	DefaultBatchTimeout = 2 * time.Second
	// DefaultExportTimeout bounds one export, retries included.
	DefaultExportTimeout = 10 * time.Second
	// DefaultMetricInterval is how often the counters are exported.
	DefaultMetricInterval = 15 * time.Second
)

// Fixed bounds of the export.
const (
	// ShutdownBudget bounds the flush when the gate stops (SIGTERM): what
	// has not left by then is dropped.
	ShutdownBudget = 3 * time.Second
	// maxAttrBytes bounds an attribute value, in bytes: host names,
	// methods and reasons come from the sandbox.
	maxAttrBytes = 256
	// maxRequestBytes bounds one serialized export request, in bytes
	// (a full batch of spans with every attribute at its bound is under
	// 2 MiB).
	maxRequestBytes = 8 << 20
	// maxRetryInterval is the longest back-off between two tries of one
	// export.
	maxRetryInterval = 2 * time.Second
)

// Limits bound the export. A zero (or negative) field means its default;
// BatchSpans is at most QueueSpans.
type Limits struct {
	QueueSpans     int           // DefaultQueueSpans
	BatchSpans     int           // DefaultBatchSpans
	BatchTimeout   time.Duration // DefaultBatchTimeout
	ExportTimeout  time.Duration // DefaultExportTimeout
	MetricInterval time.Duration // DefaultMetricInterval
}

func (l Limits) withDefaults() Limits {
	l.QueueSpans = cmp.Or(max(l.QueueSpans, 0), DefaultQueueSpans)
	l.BatchSpans = min(cmp.Or(max(l.BatchSpans, 0), DefaultBatchSpans), l.QueueSpans)
	l.BatchTimeout = cmp.Or(max(l.BatchTimeout, 0), DefaultBatchTimeout)
	l.ExportTimeout = cmp.Or(max(l.ExportTimeout, 0), DefaultExportTimeout)
	l.MetricInterval = cmp.Or(max(l.MetricInterval, 0), DefaultMetricInterval)
	return l
}

// Config configures an Exporter.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL (checked by
	// gate.CheckOTelEndpoint); spans go to Endpoint+gate.TracesPath,
	// counters to Endpoint+gate.MetricsPath.
	Endpoint string
	// Insecure must be set for an http:// Endpoint, and only then.
	Insecure bool
	// Session is the session ID, the resource's SessionKey.
	Session string
	// Policy's address rules apply to every address of the collector
	// (gate.AddrDialer); its host rules do not.
	Policy gate.Policy
	// Resolver resolves the collector's name; nil: net.DefaultResolver.
	Resolver gate.Resolver
	// Dial connects to a vetted collector address; nil: a net.Dialer.
	// Tests point it elsewhere.
	Dial gate.DialFunc
	// Limits bound the export; the zero value is the defaults.
	Limits Limits
	// Logger receives the exporter's set-up; nil discards.
	Logger *slog.Logger
}

// Exporter turns gate records into spans and counters and exports them.
type Exporter struct {
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
	tracer   trace.Tracer
	requests metric.Int64Counter
	bytes    metric.Int64Counter
	up, down metric.MeasurementOption
}

// errRedirect refuses a collector's redirect: the endpoint is what was
// checked.
var errRedirect = errors.New("telemetry: the collector redirected; redirects are not followed")

// Start returns an exporter for cfg. It does not dial: the collector is
// reached when the first batch leaves, and a collector that cannot be
// reached costs only the dropped data.
func Start(ctx context.Context, cfg Config) (*Exporter, error) {
	base, err := gate.CheckOTelEndpoint(cfg.Endpoint, cfg.Insecure, cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	lim := cfg.Limits.withDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// One client for both signals: no proxy, no redirects, vetted dials,
	// each request bounded.
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:           gate.AddrDialer(cfg.Policy, cfg.Resolver, cfg.Dial),
			TLSHandshakeTimeout:   gate.DialTimeout,
			ResponseHeaderTimeout: lim.ExportTimeout,
			MaxIdleConns:          2,
			IdleConnTimeout:       time.Minute,
		},
		Timeout:       lim.ExportTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
	}
	retry := otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Second / 2, MaxInterval: maxRetryInterval, MaxElapsedTime: lim.ExportTimeout}
	traces, metrics := *base, *base
	traces.Path += gate.TracesPath
	metrics.Path += gate.MetricsPath
	tex, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(traces.String()),
		otlptracehttp.WithHTTPClient(client),
		otlptracehttp.WithTimeout(lim.ExportTimeout),
		otlptracehttp.WithRetry(retry),
		otlptracehttp.WithMaxRequestSize(maxRequestBytes))
	if err != nil {
		return nil, fmt.Errorf("telemetry: traces: %w", err)
	}
	mex, err := otlpmetrichttp.New(ctx,
		otlpmetrichttp.WithEndpointURL(metrics.String()),
		otlpmetrichttp.WithHTTPClient(client),
		otlpmetrichttp.WithTimeout(lim.ExportTimeout),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig(retry)),
		otlpmetrichttp.WithMaxRequestSize(maxRequestBytes))
	if err != nil {
		tex.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: metrics: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(ServiceName), SessionKey.String(cfg.Session))
	// Every setting explicit: the SDK's OTEL_* environment variables do
	// not apply (the gate's environment is exact anyway).
	e := &Exporter{
		tp: sdktrace.NewTracerProvider(
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
				AttributeValueLengthLimit: maxAttrBytes, AttributeValueDepthLimit: 1, AttributeCountLimit: 16,
				EventCountLimit: 0, LinkCountLimit: 0, AttributePerEventCountLimit: 0, AttributePerLinkCountLimit: 0,
			}),
			sdktrace.WithBatcher(tex,
				sdktrace.WithMaxQueueSize(lim.QueueSpans),
				sdktrace.WithMaxExportBatchSize(lim.BatchSpans),
				sdktrace.WithBatchTimeout(lim.BatchTimeout),
				sdktrace.WithExportTimeout(lim.ExportTimeout))),
		mp: sdkmetric.NewMeterProvider(
			sdkmetric.WithResource(res),
			sdkmetric.WithCardinalityLimit(64),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mex,
				sdkmetric.WithInterval(lim.MetricInterval),
				sdkmetric.WithTimeout(lim.ExportTimeout)))),
		up:   metric.WithAttributeSet(attribute.NewSet(DirectionKey.String("up"))),
		down: metric.WithAttributeSet(attribute.NewSet(DirectionKey.String("down"))),
	}
	e.tracer = e.tp.Tracer(Scope)
	meter := e.mp.Meter(Scope)
	if e.requests, err = meter.Int64Counter(RequestsMetric, metric.WithUnit("{request}"), metric.WithDescription("Requests the gate saw, by verdict.")); err == nil {
		e.bytes, err = meter.Int64Counter(BytesMetric, metric.WithUnit("By"), metric.WithDescription("Bytes the gate relayed, by direction (up: client to upstream)."))
	}
	if err != nil {
		e.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	logger.Info("telemetry", "endpoint", base.Redacted(), "queue", lim.QueueSpans, "batch", lim.BatchSpans)
	return e, nil
}

// methods are the HTTP methods the semantic conventions name; any other
// is recorded as "_OTHER" with the original beside it.
var methods = map[string]bool{"CONNECT": true, "DELETE": true, "GET": true, "HEAD": true, "OPTIONS": true,
	"PATCH": true, "POST": true, "PUT": true, "TRACE": true, "QUERY": true}

// Record exports r: one span (gate.Config.OnRecord calls it as each
// request ends) and the counters. It never blocks on the collector.
func (e *Exporter) Record(r gate.Record) {
	method, name := r.Method, r.Method
	attrs := make([]attribute.KeyValue, 0, 12)
	if !methods[method] {
		method, name = "_OTHER", "HTTP"
		attrs = append(attrs, semconv.HTTPRequestMethodOriginalKey.String(r.Method))
	}
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddressKey.String(r.Host))
	if port, err := strconv.ParseUint(r.Port, 10, 16); err == nil && port > 0 {
		attrs = append(attrs, semconv.ServerPortKey.Int(int(port)))
	}
	if ap, err := netip.ParseAddrPort(r.Addr); err == nil {
		attrs = append(attrs, semconv.NetworkPeerAddressKey.String(ap.Addr().String()), semconv.NetworkPeerPortKey.Int(int(ap.Port())))
	}
	if r.Status != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCodeKey.Int(r.Status))
	}
	attrs = append(attrs, VerdictKey.String(r.Verdict), BytesUpKey.Int64(r.BytesUp), BytesDownKey.Int64(r.BytesDn))
	if r.Reason != "" {
		attrs = append(attrs, ReasonKey.String(r.Reason))
	}
	_, sp := e.tracer.Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(r.Time), trace.WithAttributes(attrs...))
	if r.Verdict != gate.Allowed {
		sp.SetStatus(codes.Error, r.Verdict)
	}
	sp.End(trace.WithTimestamp(r.Time.Add(r.Duration)))

	ctx := context.Background()
	e.requests.Add(ctx, 1, metric.WithAttributes(VerdictKey.String(r.Verdict)))
	e.bytes.Add(ctx, r.BytesUp, e.up)
	e.bytes.Add(ctx, r.BytesDn, e.down)
}

// Shutdown flushes what is queued and the counters, within ctx, and stops
// the exporter; what has not left when ctx ends is dropped.
func (e *Exporter) Shutdown(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- e.mp.Shutdown(ctx) }()
	err := e.tp.Shutdown(ctx)
	return errors.Join(err, <-errc)
}
