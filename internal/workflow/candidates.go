package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/validate"
)

// maxMajorProbe is how many major versions past the current one the
// candidate search asks the proxy about (path/v2, /v3, ...). A module
// rarely skips more.
const maxMajorProbe = 3

// versionsArgv lists the known versions of each module path; -e puts a
// path the proxy does not have into the output as an error instead of
// failing the whole command.
func versionsArgv(paths []string) []string {
	return append([]string{"go", "list", "-m", "-e", "-versions", "-json"}, paths...)
}

// downloadArgv downloads the given module@version queries and reports each
// as JSON; with GOTOOLCHAIN=local a module needing a newer Go fails here.
func downloadArgv(queries []string) []string {
	return append([]string{"go", "mod", "download", "-json"}, queries...)
}

// listedModule is one object of go list -m -versions -json output.
type listedModule struct {
	Path     string
	Versions []string
	Error    *struct{ Err string }
}

// parseVersions reads go list -m -e -versions -json output into a map from
// module path to its versions. Paths the proxy does not know, or whose
// listing failed, map to nothing; failed says why for each of those.
func parseVersions(stdout []byte) (versions map[string][]string, failed map[string]string, err error) {
	out, failed := map[string][]string{}, map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	for {
		var m listedModule
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, failed, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("workflow: reading go list -m output: %w", err)
		}
		if m.Path == "" {
			continue
		}
		if m.Error != nil {
			failed[m.Path] = m.Error.Err
			continue
		}
		for _, v := range m.Versions {
			if semver.IsValid(v) {
				out[m.Path] = append(out[m.Path], v)
			}
		}
	}
}

// majorPaths returns the module paths of the next maxMajorProbe major
// versions of path (example.com/m/v2, /v3, ...).
func majorPaths(path string) []string {
	var out []string
	for range maxMajorProbe {
		next, err := gomod.NextMajorPath(path)
		if err != nil {
			break
		}
		out = append(out, next)
		path = next
	}
	return out
}

// downloadedModule is one object of go mod download -json output.
type downloadedModule struct {
	Path, Version string
	Error         string
	GoMod         string
	Origin        *gomod.Origin
}

// downloadStatus is what go mod download said about one module.
type downloadStatus struct {
	Path, Version string
	// NeedsGo is the Go version the module requires when the download
	// failed because the toolchain is too old; empty otherwise.
	NeedsGo string
	// Err is any other error the go command reported for the module.
	Err string
	// Origin is where the proxy says the version came from, when it says.
	Origin *gomod.Origin
}

// parseDownload reads go mod download -json output. The go command exits
// non-zero when any module failed, so the exit code alone says nothing;
// each object's Error is classified here.
func parseDownload(stdout []byte) ([]downloadStatus, error) {
	var out []downloadStatus
	dec := json.NewDecoder(bytes.NewReader(stdout))
	for {
		var m downloadedModule
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("workflow: reading go mod download output: %w", err)
		}
		s := downloadStatus{Path: m.Path, Version: m.Version, Origin: m.Origin}
		if m.Error != "" {
			// The go command prints the same error as "go: <error>" on
			// stderr; testjson classifies that form.
			if n := testjson.NeedsNewerGo([]byte("go: " + m.Error + "\n")); len(n) > 0 {
				s.NeedsGo = n[0].Go
			} else {
				s.Err = m.Error
			}
		}
		out = append(out, s)
	}
}

// Candidates lists newer versions of the direct requirements: for each,
// the newest patch, minor and major upgrade (gomod.Candidates), major ones
// found by asking the proxy for the next maxMajorProbe major paths. acq runs in the acquire profile: these are module commands,
// never builds. Every candidate is downloaded once, so a candidate whose
// go.mod needs a Go newer than the image's is flagged
// RequiresNewerToolchain, as go get would fail for it, and linked to its
// repository and the compare view of the two versions (gomod.Links, from
// the proxy's Origin or the module path). With a cooldown
// (Cooldown.MinAge), versions published too recently are not candidates
// (the newest old enough one of their class is), and heldBack lists the
// candidates they would have been.
func Candidates(ctx context.Context, acq validate.Execer, direct []module.Version, cool Cooldown) (cands []report.Candidate, heldBack []report.HeldBack, err error) {
	cands = []report.Candidate{}
	if len(direct) == 0 {
		return cands, nil, nil
	}
	var paths []string
	for _, r := range direct {
		paths = append(paths, r.Path)
		paths = append(paths, majorPaths(r.Path)...)
	}
	out, err := acq.Exec(ctx, versionsArgv(paths), 0)
	if err != nil {
		return nil, nil, fmt.Errorf("workflow: listing versions: %w", err)
	}
	if reason := validate.OutputReason(out); reason != "" || out.ExitCode != 0 {
		return nil, nil, fmt.Errorf("workflow: listing versions: %s", CommandFailure(out, reason))
	}
	versions, failed, err := parseVersions(out.Stdout)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range direct {
		// A requirement the go command could not list (its retractions
		// unverifiable, the proxy unreachable) has candidates nobody
		// knows: never "current".
		if msg, ok := failed[r.Path]; ok {
			return nil, nil, fmt.Errorf("workflow: listing versions of %s: %s", r.Path, msg)
		}
	}
	avail := make([][]module.Version, len(direct))
	var dated []string
	for i, r := range direct {
		for _, p := range append([]string{r.Path}, majorPaths(r.Path)...) {
			for _, v := range versions[p] {
				avail[i] = append(avail[i], module.Version{Path: p, Version: v})
			}
		}
		dated = append(dated, newer(r, avail[i])...)
	}
	times, err := cool.times(ctx, acq, dated)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range direct {
		kept, held := cool.keep(r, avail[i], times)
		for _, c := range gomod.Candidates(r, kept) {
			cands = append(cands, report.Candidate{Path: c.Path, Current: r.Version, Version: c.Version.Version, Class: string(c.Kind)})
		}
		if len(held) > 0 {
			var would []report.Candidate
			for _, c := range gomod.Candidates(r, avail[i]) {
				would = append(would, report.Candidate{Path: c.Path, Version: c.Version.Version, Class: string(c.Kind)})
			}
			heldBack = append(heldBack, cool.heldBack(r, would, held)...)
		}
	}
	if len(cands) == 0 {
		return cands, heldBack, nil
	}

	queries := make([]string, len(cands))
	for i, c := range cands {
		queries[i] = c.Path + "@" + c.Version
	}
	out, err = acq.Exec(ctx, downloadArgv(queries), 0)
	if err != nil {
		return nil, nil, fmt.Errorf("workflow: downloading candidates: %w", err)
	}
	if reason := validate.OutputReason(out); reason != "" {
		return nil, nil, fmt.Errorf("workflow: downloading candidates: %s", CommandFailure(out, reason))
	}
	st, err := parseDownload(out.Stdout)
	if err != nil {
		return nil, nil, err
	}
	byQuery := map[string]downloadStatus{}
	for _, s := range st {
		byQuery[s.Path+"@"+s.Version] = s
	}
	for i, c := range cands {
		s := byQuery[c.Path+"@"+c.Version]
		if s.NeedsGo != "" {
			cands[i].RequiresNewerToolchain = true
			cands[i].GoVersion = s.NeedsGo
		}
		cands[i].Repo, cands[i].Compare = gomod.Links(c.Path, c.Current, c.Version, s.Origin)
	}
	return cands, heldBack, nil
}

// ListVersions lists the known release versions of each module path
// through acq (acquire profile: go list -m -versions, which leaves out
// retracted versions and pseudo-versions); paths the proxy does not know
// map to nothing.
func ListVersions(ctx context.Context, acq validate.Execer, paths []string) (map[string][]string, error) {
	out, err := acq.Exec(ctx, versionsArgv(paths), 0)
	if err != nil {
		return nil, fmt.Errorf("workflow: listing versions: %w", err)
	}
	if reason := validate.OutputReason(out); reason != "" || out.ExitCode != 0 {
		return nil, fmt.Errorf("workflow: listing versions: %s", CommandFailure(out, reason))
	}
	versions, _, err := parseVersions(out.Stdout)
	return versions, err
}

// CommandFailure describes a module command that did not succeed, for an
// error message: the reason, or the exit code and the start of stderr.
func CommandFailure(out validate.Output, reason string) string {
	if reason != "" {
		return reason
	}
	msg := strings.TrimSpace(string(out.Stderr))
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	return fmt.Sprintf("exit %d: %s", out.ExitCode, msg)
}
