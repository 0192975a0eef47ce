package sandbox

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ReadFileResult turns the outcome of ReadFileShell (or of a program that
// answers as it does: the Docker backend's agent) run on p with maxBytes
// into the file's bytes (a slice of stdout) or a typed error:
// ErrIsDirectory, ErrFileNotExist, ErrNotRegularFile, ErrFileTooLarge, or
// an error for any other exit and for a body that is not the size
// announced (the file changed while read). backend prefixes the errors.
func ReadFileResult(backend, p string, code int, stdout []byte, stderr string, maxBytes int64) ([]byte, error) {
	head, body, _ := bytes.Cut(stdout, []byte("\n"))
	size, serr := strconv.ParseInt(string(head), 10, 64)
	switch code {
	case 0:
	case ExitPathIsDirectory:
		return nil, fmt.Errorf("%s: read %s: %w", backend, p, ErrIsDirectory)
	case ExitFileNotExist:
		return nil, fmt.Errorf("%s: read %s: %w", backend, p, ErrFileNotExist)
	case ExitNotRegularFile:
		return nil, fmt.Errorf("%s: read %s: %w", backend, p, ErrNotRegularFile)
	case ExitFileTooLarge:
		return nil, fmt.Errorf("%s: read %s: %w: %d bytes, at most %d", backend, p, ErrFileTooLarge, size, maxBytes)
	default:
		return nil, fmt.Errorf("%s: read %s: exit %d: %s", backend, p, code, strings.TrimSpace(stderr))
	}
	if serr != nil || int64(len(body)) != size {
		return nil, fmt.Errorf("%s: read %s: changed while read (%q announced, %d bytes came)", backend, p, head, len(body))
	}
	return body, nil
}
