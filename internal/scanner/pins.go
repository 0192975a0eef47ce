// Package scanner builds, stores and verifies the vulnerability scanner
// (govulncheck from golang.org/x/vuln) and runs it on a snapshot.
//
// Threat model: the scanner reads hostile code and its verdict decides what
// a person trusts, so the binary must be exactly the pinned one, built by
// the toolchain image it scans with, and nothing the repository controls
// may reach it.
//
//   - Pinned: the version for each Go minor is data (pins/pins.json). It is
//     built from a module this package writes, whose go.sum
//     (pins/<recipe>.sum) is committed here: go build -mod=readonly checks
//     every module it downloads against those hashes, whatever the proxy
//     serves.
//   - Built apart: the build runs in toolchain's Tool profile, which mounts
//     no source, no repository module cache, no configured tools or
//     database, only fresh module, build and output directories of its own.
//   - Stored by the host: the host, not a container, copies the binary into
//     DataDir/scanners/<version>-<image>/ (0555 directory, 0555 binary) with
//     its sha256 in scanner.json; a later run reuses it.
//   - Verified before every use (Verify): the sha256 recorded at build, and
//     the build info (module path and version, every dependency's hash equal
//     to the pinned go.sum and none replaced, the image's Go version,
//     GOOS/GOARCH, -trimpath, CGO_ENABLED=0). A mismatch is a
//     *VerifyError naming the reason; the scan does not run.
//   - Run without network (Scan): in the Execute profile, the scanner at
//     toolchain.ToolsDir and the database at toolchain.VulnDBDir, both
//     read-only; its stream is parsed fail-closed by internal/vulnjson.
package scanner

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// pinFiles holds the pin table and each recipe's go.mod and go.sum.
//
//go:embed pins/pins.json pins/*.mod pins/*.sum
var pinFiles embed.FS

// ErrNoPin reports a Go minor the pin table has no scanner for.
var ErrNoPin = errors.New("scanner: no pinned scanner for this Go minor")

// Tool is the command the scanner is built from; Module is its module.
const (
	Tool   = "golang.org/x/vuln/cmd/govulncheck"
	Module = "golang.org/x/vuln"
	// BinaryName is the scanner's file name in its directory and under
	// toolchain.ToolsDir.
	BinaryName = "govulncheck"
)

// Pin is one row of the pin table: the scanner a Go minor's images build.
type Pin struct {
	Go      string `json:"go"`      // the Go minor, such as "1.26"
	Module  string `json:"module"`  // always Module
	Version string `json:"version"` // such as "v1.9.0"
	Recipe  string `json:"recipe"`  // names pins/<recipe>.mod and .sum
}

// GoMod and GoSum return the recipe's generated module files.
func (p Pin) GoMod() ([]byte, error) { return pinFiles.ReadFile("pins/" + p.Recipe + ".mod") }

// GoSum returns the recipe's committed go.sum.
func (p Pin) GoSum() ([]byte, error) { return pinFiles.ReadFile("pins/" + p.Recipe + ".sum") }

// Pins returns the pin table.
func Pins() ([]Pin, error) {
	b, err := pinFiles.ReadFile("pins/pins.json")
	if err != nil {
		return nil, fmt.Errorf("scanner: %w", err)
	}
	var t struct {
		Scanners []Pin `json:"scanners"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("scanner: pins.json: %w", err)
	}
	for _, p := range t.Scanners {
		if p.Module != Module || p.Version == "" || p.Recipe == "" || strings.ContainsAny(p.Recipe, "/\\") || strings.Contains(p.Recipe, "..") {
			return nil, fmt.Errorf("scanner: pins.json: malformed row %+v", p)
		}
	}
	return t.Scanners, nil
}

// PinFor returns the pin for an image's Go version ("go1.26.8") or minor
// ("1.26"); ErrNoPin when the table has none.
func PinFor(goVersion string) (Pin, error) {
	minor := minorOf(goVersion)
	pins, err := Pins()
	if err != nil {
		return Pin{}, err
	}
	for _, p := range pins {
		if p.Go == minor {
			return p, nil
		}
	}
	return Pin{}, fmt.Errorf("%w: go %s (the table has %s)", ErrNoPin, minor, pinnedMinors(pins))
}

func pinnedMinors(pins []Pin) string {
	var m []string
	for _, p := range pins {
		m = append(m, p.Go)
	}
	return strings.Join(m, ", ")
}

// minorOf turns "go1.26.8", "1.26.8" or "1.26" into "1.26".
func minorOf(v string) string {
	v = strings.TrimPrefix(v, "go")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// sums reads a go.sum into "path version" → hash (the module zip's hash,
// not the /go.mod line's).
func sums(gosum []byte) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(string(gosum), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || strings.HasSuffix(f[1], "/go.mod") {
			continue
		}
		m[f[0]+" "+f[1]] = f[2]
	}
	return m
}
