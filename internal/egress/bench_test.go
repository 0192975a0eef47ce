package egress

import (
	"context"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/image"
)

// BenchmarkGatePerPhase weighs the two ways a toolchain run could tell its
// phases' records apart: a gate per phase (Start and Close, the
// baseline) or one gate per run read after each phase (Take), measured
// in the same rounds:
//
//	STOCKADE_REQUIRE_ENGINE=1 go test ./internal/egress -run '^$' -bench GatePerPhase -benchtime 5x
//
// It reports start_ms (Start: network, create, connect, start, ready),
// close_ms, take_ms (one record read) and take/start.
func BenchmarkGatePerPhase(b *testing.B) {
	eng := enginetest.Client(b)
	ctx := context.Background()
	cache, err := enginetest.ImageCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	img, err := image.BuildGate(ctx, eng, image.Options{CacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := container.ToolchainGateSpec(container.Scope{Owner: enginetest.Owner(b), Run: "bench", DataDir: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	spec.Image = img.ID
	var start, stop, take time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := container.RandomName("bench-gate")
		t0 := time.Now()
		g, err := Start(ctx, eng, Config{Name: name, Network: name + "-net", Spec: spec, Settings: gate.Settings{Policy: gate.Policy{Allowed: []string{"proxy.golang.org"}}}})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := g.Take(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := g.Close(ctx); err != nil {
			b.Fatal(err)
		}
		start, take, stop = start+t1.Sub(t0), take+t2.Sub(t1), stop+time.Since(t2)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(start), "start_ms")
	b.ReportMetric(ms(stop), "close_ms")
	b.ReportMetric(ms(take), "take_ms")
	b.ReportMetric(float64(take)/float64(start), "take/start")
}
