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
