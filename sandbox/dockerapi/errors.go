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
	ErrNotRunning  = errors.New("dockerapi: container not running") // 409 from kill and exec; see answerNotRunning
	ErrNotModified = errors.New("dockerapi: not modified")          // 304
	ErrEngine      = errors.New("dockerapi: engine error")          // 5xx
)

// Error is the engine's answer to a call that did not succeed.
type Error struct {
	Method     string // HTTP method of the call
	Path       string // API path, without the version prefix
	StatusCode int    // HTTP status, as the engine sent it
	Message    string // the engine's message, or the start of a non-JSON body
	// Cause is the structured cause Podman's compatibility API sends
	// beside the message ("no such container", "that name is already in
	// use"); "" from Docker. See causeStatus.
	Cause      string
	notRunning bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("dockerapi: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Is matches the sentinel for e's status: the status Docker answers for
// the same condition (see causeStatus).
func (e *Error) Is(target error) bool {
	status := e.status()
	switch target {
	case ErrBadRequest:
		return status == http.StatusBadRequest
	case ErrForbidden:
		return status == http.StatusUnauthorized || status == http.StatusForbidden
	case ErrNotFound:
		return status == http.StatusNotFound
	case ErrConflict:
		return status == http.StatusConflict
	case ErrNotRunning:
		return e.notRunning
	case ErrNotModified:
		return status == http.StatusNotModified
	case ErrEngine:
		return status >= 500
	}
	return false
}

// status is the status Docker answers for what e says: StatusCode, unless
// it is Podman's catch-all 500 and Cause names a condition Docker answers
// otherwise.
func (e *Error) status() int {
	if e.StatusCode == http.StatusInternalServerError {
		if s := causeStatus(e.Cause); s != 0 {
			return s
		}
	}
	return e.StatusCode
}

// podmanCauses are the causes Podman's compatibility API (4.x) sends with
// a 500 for conditions Docker answers with another status, each with that
// status. A cause is the text of the innermost error of libpod's define
// package or of containers/storage: a fixed vocabulary, not a message.
// Each was recorded from Podman 4.3 (TestPodmanAnswers) or read in
// libpod's errors.
var podmanCauses = map[string]int{
	"no such container":                  http.StatusNotFound,  // define.ErrNoSuchCtr
	"container has already been removed": http.StatusNotFound,  // define.ErrCtrRemoved: a removal raced ours
	"no such volume":                     http.StatusNotFound,  // define.ErrNoSuchVolume
	"network not found":                  http.StatusNotFound,  // define.ErrNoSuchNetwork
	"no such exec session":               http.StatusNotFound,  // define.ErrNoSuchExecSession
	"image not known":                    http.StatusNotFound,  // storage.ErrImageUnknown
	"that name is already in use":        http.StatusConflict,  // storage.ErrDuplicateName: a container create
	"container already exists":           http.StatusConflict,  // define.ErrCtrExists
	"volume already exists":              http.StatusConflict,  // define.ErrVolumeExists
	"network already exists":             http.StatusConflict,  // define.ErrNetworkExists: a network create
	"container state improper":           http.StatusConflict,  // define.ErrCtrStateInvalid: kill or exec of a stopped container
	"volume is being used":               http.StatusConflict,  // define.ErrVolumeBeingUsed
	"network is being used":              http.StatusForbidden, // define.ErrNetworkInUse: Docker's "has active endpoints"
}

// causeStatus returns the status Docker answers for the condition Podman
// names by cause, or 0 for a cause not in podmanCauses (which stays the
// 500 it came with).
func causeStatus(cause string) int {
	return podmanCauses[cause]
}

func newError(r request, resp *http.Response) *Error {
	e := &Error{Method: r.method, Path: r.path, StatusCode: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e.Message, e.Cause = engineMessage(body)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	e.notRunning = r.notRunning && answerNotRunning(e.status(), e.Message)
	return e
}

// answerNotRunning reports whether the engine's answer to a call that needs
// a running container (kill, exec create, exec start: the call sites set
// request.notRunning) says the container is not running. A 409 says so by
// itself: those endpoints answer 409 only for a container that is stopped,
// paused or restarting, which for us is the same, since it cannot run
// commands. Podman says the same with a 500 whose cause is "container
// state improper", which status (through causeStatus) turns into that 409.
// Engine 20.10 answers an exec start that races the container's end with a
// 500, which the status cannot tell from other failures; only then is the
// message read, by messageFact.
func answerNotRunning(status int, msg string) bool {
	switch {
	case status == http.StatusConflict:
		return true
	case status == http.StatusInternalServerError:
		return messageFact(msg) == factNotRunning
	}
	return false
}

// fact is what an engine message says where its status does not.
type fact int

const (
	factNone       fact = iota
	factNotRunning      // the container is not running
	factNotFound        // the image or repository does not exist
)

// messageFact is the one place Stockade reads the text of an engine's error,
// for the two answers whose status cannot tell (each recorded from a real
// engine and kept as a case of TestMessageFact):
//
//   - a 500 to an exec start racing the container's end (Engine 20.10):
//     "Container ID is not running: Exited (137) Less than a second ago";
//   - an error inside an image pull's progress stream, after the engine
//     answered 200: "manifest for NAME not found: manifest unknown: …" or
//     "pull access denied for NAME, repository does not exist or may
//     require 'docker login'".
//
// Callers use it only for the answer it was recorded from: the status and
// the call site come first, and no package outside dockerapi reads error
// text at all.
func messageFact(msg string) fact {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, " is not running"):
		return factNotRunning
	case strings.Contains(m, " not found"), strings.Contains(m, " does not exist"):
		return factNotFound
	}
	return factNone
}

// engineMessage extracts {"message": "...", "cause": "..."} (Podman adds
// the cause) or falls back to the body text, which some engines and
// proxies send as plain text or HTML.
func engineMessage(body []byte) (msg, cause string) {
	var m struct {
		Message string `json:"message"`
		Cause   string `json:"cause"`
	}
	if err := json.Unmarshal(body, &m); err == nil && m.Message != "" {
		return m.Message, m.Cause
	}
	s := strings.TrimSpace(string(body))
	const max = 512
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s, ""
}

// StreamError is an error the engine reported inside a JSON progress stream
// (image pull and load) after answering 200.
type StreamError struct {
	Op      string // "pull REF" or "load"
	Message string
}

func (e *StreamError) Error() string { return "dockerapi: " + e.Op + ": " + e.Message }

// Is lets a pull of a missing image match ErrNotFound. Only the message can
// tell (see messageFact), and only for a pull.
func (e *StreamError) Is(target error) bool {
	return target == ErrNotFound && strings.HasPrefix(e.Op, "pull ") && messageFact(e.Message) == factNotFound
}
