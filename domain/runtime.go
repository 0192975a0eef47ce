package domain

import (
	"errors"
	"fmt"
)

// RuntimeRunsc is gVisor's OCI runtime, as scripts/runsc-up registers it
// with Docker: every system call of the container is served by gVisor's
// own kernel (the Sentry, in user space), not the host's.
const RuntimeRunsc = "runsc"

// ErrRuntimeUnavailable reports a runtime the engine does not offer, or a
// name no engine could mean. Nothing falls back to another runtime: a
// container asked to run under gVisor never runs under runc instead.
var ErrRuntimeUnavailable = errors.New("the engine does not offer that runtime")

// ErrInvalidRuntime reports a runtime name no engine could mean.
var ErrInvalidRuntime = errors.New("invalid runtime name")

// maxRuntimeName bounds a runtime's name, in bytes.
const maxRuntimeName = 64

// CheckRuntimeName refuses a runtime name no engine could mean: more than
// 64 bytes, or anything but letters, digits, '.', '_' and '-' ("" is the
// engine's default and passes). Errors match ErrInvalidRuntime.
func CheckRuntimeName(name string) error {
	if len(name) > maxRuntimeName {
		return fmt.Errorf("%w: %d bytes", ErrInvalidRuntime, len(name))
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q", ErrInvalidRuntime, name)
		}
	}
	return nil
}
