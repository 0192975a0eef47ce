package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Sentinels matched by *Error through errors.Is.
var (
	ErrBadRequest  = errors.New("dockerapi: bad request")           // 400
	ErrForbidden   = errors.New("dockerapi: forbidden")             // 401, 403
	ErrNotFound    = errors.New("dockerapi: not found")             // 404
	ErrConflict    = errors.New("dockerapi: conflict")              // 409
	ErrNotRunning  = errors.New("dockerapi: container not running") // 409 from kill, exec, attach; and ContainerRunning checks
	ErrNotModified = errors.New("dockerapi: not modified")          // 304
	ErrEngine      = errors.New("dockerapi: engine error")          // 5xx
)

// Error is the engine's answer to a call that did not succeed.
type Error struct {
	Method     string // HTTP method of the call
	Path       string // API path, without the version prefix
	StatusCode int    // HTTP status
	Message    string // the engine's message, or the start of a non-JSON body
	notRunning bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("dockerapi: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Is matches the sentinel for e's status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	case ErrForbidden:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrNotRunning:
		return e.notRunning
	case ErrNotModified:
		return e.StatusCode == http.StatusNotModified
	case ErrEngine:
		return e.StatusCode >= 500
	}
	return false
}

func newError(r request, resp *http.Response) *Error {
	e := &Error{Method: r.method, Path: r.path, StatusCode: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e.Message = engineMessage(body)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	// A 409 from kill, exec or attach means the container is not running
	// (or is paused, which for our purposes is the same: it cannot run
	// commands). Only the client looks at the text, and only to refine a 409.
	if resp.StatusCode == http.StatusConflict && (r.notRunning || strings.Contains(e.Message, "is not running")) {
		e.notRunning = true
	}
	return e
}

// engineMessage extracts {"message": "..."} or falls back to the body text,
// which some engines and proxies send as plain text or HTML.
func engineMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &m); err == nil && m.Message != "" {
		return m.Message
	}
	s := strings.TrimSpace(string(body))
	const max = 512
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// StreamError is an error the engine reported inside a JSON progress stream
// (image pull and load) after answering 200.
type StreamError struct {
	Op      string
	Message string
}

func (e *StreamError) Error() string { return "dockerapi: " + e.Op + ": " + e.Message }

// Is lets a pull of a missing image match ErrNotFound.
func (e *StreamError) Is(target error) bool {
	if target == ErrNotFound {
		m := strings.ToLower(e.Message)
		return strings.Contains(m, "not found") || strings.Contains(m, "does not exist")
	}
	return false
}
