package gate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// ControlSocket is the abstract Unix socket (Linux) the gate answers the
// host on; only processes in the gate container's network namespace reach
// it.
const ControlSocket = "@stockade-gate"

// Where the host finds the gate: constants here, below everything that runs
// it, so that what only runs a gate (internal/egress, sandbox/kubernetes)
// need not link the image builder or the programs' bytes.
const (
	// Program is where the gate image holds the gate: the image's command,
	// and what the host execs with a control command (Program CmdReady).
	// internal/image's BuildGate puts it there (its ProgramDir and the
	// program's name; TestProgramImage checks they make this path).
	Program = "/usr/local/bin/stockade-gate"
	// Image is the tag of the gate image internal/image's BuildGate
	// composes, unless told another, and the image a backend's gate runs
	// when its configuration names none.
	Image = "stockade/gate:local"
)

// Control commands, one line each.
const (
	CmdReady = "ready" // answered "ok"
	CmdLog   = "log"   // answered with the LogDump as JSON
)

// controlTimeout bounds one control exchange.
const controlTimeout = 10 * time.Second

// ServeControl answers control commands on l until ctx ends.
func (s *Server) ServeControl(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go s.control(c)
	}
}

func (s *Server) control(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(controlTimeout))
	line, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
	if err != nil {
		return
	}
	switch strings.TrimSpace(line) {
	case CmdReady:
		io.WriteString(c, "ok\n")
	case CmdLog:
		// No HTML escaping: a bounded field's JSON is then at most twice
		// its length (Bound).
		enc := json.NewEncoder(c)
		enc.SetEscapeHTML(false)
		enc.Encode(s.log.Snapshot())
	default:
		io.WriteString(c, "unknown command\n")
	}
}

// Ask sends cmd to the gate's control socket at addr and copies the answer
// to w.
func Ask(ctx context.Context, addr, cmd string, w io.Writer) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return fmt.Errorf("gate: control: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return fmt.Errorf("gate: control: %w", err)
	}
	if _, err := io.Copy(w, c); err != nil {
		return fmt.Errorf("gate: control: %w", err)
	}
	return nil
}
