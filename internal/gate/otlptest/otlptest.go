// Package otlptest is an OTLP/HTTP receiver for tests: it decodes the
// protobuf export requests the gate's exporter (internal/gate/telemetry)
// sends, with the protocol's own message types, and keeps the spans and
// metric points in plain Go values a test can compare, locally
// (httptest) or from a receiver in a container (Fetch of its dump).
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stockade/stockade/internal/gate"
)

// DumpPath is where a Receiver answers GET with its Dump as JSON.
const DumpPath = "/dump"

// maxRequestBytes bounds one export request's body, in bytes.
const maxRequestBytes = 32 << 20

// Span is one received span. Attributes are split by type: Str holds
// string values, Int integer ones; other types are not kept.
type Span struct {
	Name          string            `json:"name"`
	Kind          string            `json:"kind"` // "client", "server", ...
	TraceID       string            `json:"trace_id"`
	Start         time.Time         `json:"start"`
	End           time.Time         `json:"end"`
	Status        string            `json:"status"` // "unset", "ok" or "error"
	StatusMessage string            `json:"status_message,omitempty"`
	Str           map[string]string `json:"str"`
	Int           map[string]int64  `json:"int"`
	Resource      map[string]string `json:"resource"` // string attributes
	Scope         string            `json:"scope"`
}

// Point is one integer sum data point.
type Point struct {
	Metric     string            `json:"metric"`
	Unit       string            `json:"unit"`
	Monotonic  bool              `json:"monotonic"`
	Cumulative bool              `json:"cumulative"`
	Attrs      map[string]string `json:"attrs"` // every attribute, integers in decimal
	Value      int64             `json:"value"`
	Time       time.Time         `json:"time"`
	Resource   map[string]string `json:"resource"`
}

// Dump is what a Receiver holds.
type Dump struct {
	Spans    []Span   `json:"spans"`
	Points   []Point  `json:"points"`
	Requests int      `json:"requests"` // export requests decoded
	Errors   []string `json:"errors"`   // requests it could not decode
}

// Counter returns the last value of an integer sum whose attributes are
// exactly attrs (nil for none), and whether there was one.
func (d Dump) Counter(metric string, attrs map[string]string) (int64, bool) {
	var v int64
	var found bool
	for _, p := range d.Points {
		if p.Metric == metric && sameAttrs(p.Attrs, attrs) {
			v, found = p.Value, true
		}
	}
	return v, found
}

func sameAttrs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Receiver answers OTLP/HTTP protobuf exports: POST to any path ending in
// gate.TracesPath or gate.MetricsPath, and GET DumpPath. The zero value
// is ready; it is safe for concurrent use.
type Receiver struct {
	mu   sync.Mutex
	dump Dump
}

// Dump returns a copy of what r received.
func (r *Receiver) Dump() Dump {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.dump
	d.Spans = append([]Span(nil), d.Spans...)
	d.Points = append([]Point(nil), d.Points...)
	d.Errors = append([]string(nil), d.Errors...)
	return d
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, DumpPath):
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r.Dump())
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, gate.TracesPath):
		var m coltracepb.ExportTraceServiceRequest
		if r.decode(w, req, &m) {
			r.addSpans(&m)
			answer(w, &coltracepb.ExportTraceServiceResponse{})
		}
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, gate.MetricsPath):
		var m colmetricpb.ExportMetricsServiceRequest
		if r.decode(w, req, &m) {
			r.addPoints(&m)
			answer(w, &colmetricpb.ExportMetricsServiceResponse{})
		}
	default:
		http.NotFound(w, req)
	}
}

// decode reads a protobuf request body into m, or answers 400 and records
// why.
func (r *Receiver) decode(w http.ResponseWriter, req *http.Request, m proto.Message) bool {
	err := func() error {
		if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			return fmt.Errorf("content type %q, want application/x-protobuf", ct)
		}
		var body io.Reader = http.MaxBytesReader(w, req.Body, maxRequestBytes)
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				return err
			}
			body = io.LimitReader(zr, maxRequestBytes)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		return proto.Unmarshal(b, m)
	}()
	if err == nil {
		return true
	}
	r.mu.Lock()
	r.dump.Errors = append(r.dump.Errors, req.URL.Path+": "+err.Error())
	r.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
	return false
}

func answer(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func (r *Receiver) addSpans(m *coltracepb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range m.GetResourceSpans() {
		res, _ := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				str, ints := attrs(s.GetAttributes())
				spans = append(spans, Span{
					Name:          s.GetName(),
					Kind:          strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())).UTC(),
					End:           time.Unix(0, int64(s.GetEndTimeUnixNano())).UTC(),
					Status:        strings.ToLower(strings.TrimPrefix(s.GetStatus().GetCode().String(), "STATUS_CODE_")),
					StatusMessage: s.GetStatus().GetMessage(),
					Str:           str,
					Int:           ints,
					Resource:      res,
					Scope:         ss.GetScope().GetName(),
				})
			}
		}
	}
	r.mu.Lock()
	r.dump.Requests++
	r.dump.Spans = append(r.dump.Spans, spans...)
	r.mu.Unlock()
}

func (r *Receiver) addPoints(m *colmetricpb.ExportMetricsServiceRequest) {
	var points []Point
	for _, rm := range m.GetResourceMetrics() {
		res, _ := attrs(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				sum := mt.GetSum()
				for _, dp := range sum.GetDataPoints() {
					str, ints := attrs(dp.GetAttributes())
					for k, v := range ints {
						str[k] = strconv.FormatInt(v, 10)
					}
					points = append(points, Point{
						Metric:     mt.GetName(),
						Unit:       mt.GetUnit(),
						Monotonic:  sum.GetIsMonotonic(),
						Cumulative: sum.GetAggregationTemporality() == metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
						Attrs:      str,
						Value:      dp.GetAsInt(),
						Time:       time.Unix(0, int64(dp.GetTimeUnixNano())).UTC(),
						Resource:   res,
					})
				}
			}
		}
	}
	r.mu.Lock()
	r.dump.Requests++
	r.dump.Points = append(r.dump.Points, points...)
	r.mu.Unlock()
}

// attrs splits kvs into string and integer values.
func attrs(kvs []*commonpb.KeyValue) (map[string]string, map[string]int64) {
	str, ints := map[string]string{}, map[string]int64{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			str[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			ints[kv.GetKey()] = v.IntValue
		}
	}
	return str, ints
}

// fetchTimeout bounds Fetch.
const fetchTimeout = 10 * time.Second

// Fetch GETs the Dump of the receiver whose dump is at url.
func Fetch(ctx context.Context, url string) (Dump, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Dump{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Dump{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Dump{}, fmt.Errorf("otlptest: %s: %s", url, resp.Status)
	}
	var d Dump
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRequestBytes)).Decode(&d); err != nil {
		return Dump{}, fmt.Errorf("otlptest: %s: %w", url, err)
	}
	return d, nil
}
