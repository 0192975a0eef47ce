package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/vulnjson"
)

// Budgets and caps of a scan.
const (
	// DefaultScanTimeout bounds the scanner's command when the caller
	// gives no timeout.
	DefaultScanTimeout = 10 * time.Minute
	// DefaultOutputCap is how much of each of the scanner's streams is
	// kept when Options.OutputCap is zero, in bytes; a stream cut at the
	// cap makes the scan inconclusive.
	DefaultOutputCap = 32 << 20
	// containerSlack is how much longer the scan's container lives than
	// the scanner's own timeout.
	containerSlack = time.Minute
)

// ErrNoScan reports a run configured without the scanner and database
// directories (toolchain.Config.ScanTools, ScanVulnDB).
var ErrNoScan = errors.New("scanner: the run mounts no scanner and database")

// Argv is the scanner's command in the execute container: the database at
// toolchain.VulnDBDir, JSON output, every package of the module.
var Argv = []string{toolchain.ToolsDir + "/" + BinaryName, "-db", "file://" + toolchain.VulnDBDir, "-format", "json", "./..."}

// Options bound one scan. The zero value takes the defaults.
type Options struct {
	// Timeout bounds the scanner's command; zero means
	// DefaultScanTimeout.
	Timeout time.Duration
	// OutputCap is how many bytes of each of the scanner's streams are
	// kept; a stream past it makes the scan inconclusive. Zero means
	// DefaultOutputCap.
	OutputCap int64
	// Logger receives debug detail; nil discards.
	Logger *slog.Logger
}

// Scan verifies the copy of s that run r mounts (toolchain.Config.ScanTools,
// made by toolchain.Open) against what s recorded at build, identifies the
// database copy r mounts, and runs the scanner on the snapshot snapDir in
// one execute container, within o's bounds: no network, source and module
// cache read-only, the scanner and database read-only, a fresh build cache
// seeded by seed. What the scanner did is in the scan (an inconclusive
// status when it cannot be trusted); an error is Stockade's own failure, a
// *VerifyError among them.
func Scan(ctx context.Context, r *toolchain.Runner, s Scanner, snapDir string, seed cacheseed.Seed, o Options) (report.VulnScan, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultScanTimeout
	}
	outputCap := o.OutputCap
	if outputCap <= 0 {
		outputCap = DefaultOutputCap
	}
	cfg := r.Config()
	if cfg.ScanTools == "" || cfg.ScanVulnDB == "" {
		return report.VulnScan{}, ErrNoScan
	}
	if err := s.VerifyCopy(cfg.ScanTools); err != nil {
		return report.VulnScan{}, err
	}
	modified, sum, err := vulndb.Identify(cfg.ScanVulnDB)
	if err != nil {
		return report.VulnScan{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, timeout+containerSlack+toolchain.HostGrace)
	defer cancel()
	c, err := r.Start(sctx, toolchain.Job{
		Profile: toolchain.Execute, Source: snapDir, Timeout: timeout + containerSlack,
		ReadOnly: seed.Mounts(), Env: seed.Env(),
	})
	if err != nil {
		return report.VulnScan{}, fmt.Errorf("scanner: %w", err)
	}
	t := time.Now()
	res, err := c.Exec(sctx, Argv, toolchain.ExecOptions{Timeout: timeout, OutputCap: outputCap})
	if cerr := c.Close(context.WithoutCancel(ctx)); cerr != nil {
		log.Warn("removing the scan container failed", "err", cerr)
	}
	if err != nil {
		return report.VulnScan{}, fmt.Errorf("scanner: %w", err)
	}
	log.Debug("scan done", "exit", res.ExitCode, "dur", time.Since(t), "stdout", len(res.Stdout))
	out := vulnjson.Parse(vulnjson.Output{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		Truncated: res.Truncated(), StdoutBytes: res.StdoutBytes, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
	})
	out.Scanner = report.Scanner{Name: BinaryName, Version: s.Meta.Version, SHA256: s.Meta.SHA256, GoVersion: s.Meta.GoVersion}
	out.DB = report.VulnDB{Modified: modified, SHA256: sum}
	return out, nil
}
