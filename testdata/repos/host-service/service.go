// Package service reaches for services a machine may run and the sandbox
// never does: PostgreSQL on its port, the Docker daemon on its socket.
package service

import (
	"net"
	"time"
)

// Ping dials network address and hangs up.
func Ping(network, address string) error {
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
