package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"

	"github.com/stockade/stockade/internal/report"
)

// splitPos splits "dir/file.go:12:5" into the file and line; anything it
// cannot read is returned whole as the file.
func splitPos(pos string) (string, int) {
	if pos == "" {
		return "", 0
	}
	parts := strings.Split(pos, ":")
	if len(parts) >= 2 {
		if n, err := strconv.Atoi(parts[1]); err == nil {
			return relFile(parts[0]), n
		}
	}
	return relFile(pos), 0
}

// relFile makes a path relative to the module root in the container.
func relFile(f string) string {
	f = strings.TrimPrefix(f, "/src/")
	return strings.TrimPrefix(f, "./")
}

// volatileRE matches what changes between runs and machines inside a
// message: positions, hex addresses, durations, temporary paths.
var volatileRE = regexp.MustCompile(`:\d+(:\d+)?|0x[0-9a-f]+|\d+(\.\d+)?(ns|µs|ms|s)\b|/tmp/[^\s:]*`)

// newFinding returns a finding whose key is built from the kind, package,
// test, file and the message with its volatile parts removed, so the same
// problem keeps its key across runs and machines.
func newFinding(kind, pkg, test, file string, line int, msg string) report.Finding {
	norm := volatileRE.ReplaceAllString(strings.TrimSpace(msg), "")
	h := sha256.Sum256([]byte(strings.Join([]string{kind, pkg, test, file, norm}, "\x00")))
	return report.Finding{
		Key:     kind + ":" + pkg + ":" + test + ":" + hex.EncodeToString(h[:6]),
		Kind:    kind,
		Package: pkg,
		Test:    test,
		File:    file,
		Line:    line,
		Message: strings.TrimSpace(msg),
	}
}
