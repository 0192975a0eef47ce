package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// spawnWait bounds how long DialProcs waits for a daemon it started to
// listen.
const spawnWait = 3 * time.Second

// DialProcs connects to the process daemon of the calling user
// (ProcSocket), first running spawn, which must start one in the
// background, when none listens. Two callers racing both spawn; the
// second daemon cannot listen and exits.
func DialProcs(spawn func() error) (net.Conn, error) {
	addr := "@" + ProcSocket(os.Getuid())
	c, err := net.Dial("unix", addr)
	if err == nil {
		return c, nil
	}
	if err := spawn(); err != nil {
		return nil, fmt.Errorf("agent: start the process daemon: %w", err)
	}
	deadline := time.Now().Add(spawnWait)
	for {
		c, err = net.Dial("unix", addr)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Relay copies in to c and c to out until either direction ends, then
// closes c.
func Relay(c net.Conn, in io.Reader, out io.Writer) error {
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(c, in)
		done <- err
	}()
	go func() {
		_, err := io.Copy(out, c)
		if err == nil {
			err = io.EOF
		}
		done <- err
	}()
	err := <-done
	c.Close()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
