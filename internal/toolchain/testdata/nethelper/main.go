// Command nethelper tries to reach the network from inside a container and
// reports what happened; the execute profile's tests run it. It exits 0
// only when every attempt failed.
//
// With the argument "loopback" it checks the opposite: that loopback works
// as on a host. It listens on 127.0.0.1, ::1, 0.0.0.0 and the unspecified
// address, dials each through localhost and the literal addresses, and
// exits 0 only when every dial reached its listener.
package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "loopback" {
		if !loopback() {
			os.Exit(1)
		}
		return
	}
	reached := false
	c, err := net.DialTimeout("tcp", "1.1.1.1:443", 3*time.Second)
	if err == nil {
		c.Close()
		reached = true
	}
	fmt.Printf("dial: %v\n", err)
	addrs, err := net.LookupHost("proxy.golang.org")
	if err == nil {
		reached = true
	}
	fmt.Printf("lookup: %v %v\n", addrs, err)
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		fmt.Printf("interface: %s\n", i.Name)
		if i.Flags&net.FlagLoopback == 0 {
			reached = true
		}
	}
	if reached {
		os.Exit(1)
	}
}

// loopback listens and dials on loopback; it reports whether every dial
// was accepted by its listener.
func loopback() bool {
	ok := true
	addrs, err := net.LookupHost("localhost")
	fmt.Printf("lookup localhost: %v %v\n", addrs, err)
	if err != nil {
		ok = false
	}
	for _, tc := range []struct {
		network, listen string
		dial            []string // hosts to dial the listener's port on
	}{
		{"tcp4", "127.0.0.1:0", []string{"127.0.0.1", "localhost"}},
		{"tcp6", "[::1]:0", []string{"::1"}},
		{"tcp4", "0.0.0.0:0", []string{"127.0.0.1", "localhost"}},
		{"tcp", ":0", []string{"127.0.0.1", "::1", "localhost"}},
		{"tcp", "localhost:0", []string{"localhost"}},
	} {
		l, err := net.Listen(tc.network, tc.listen)
		if err != nil {
			fmt.Printf("listen %s %s: %v\n", tc.network, tc.listen, err)
			ok = false
			continue
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("ok"))
				c.Close()
			}
		}()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		for _, h := range tc.dial {
			addr := net.JoinHostPort(h, port)
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			var got [2]byte
			if err == nil {
				c.SetDeadline(time.Now().Add(3 * time.Second))
				_, err = c.Read(got[:])
				c.Close()
			}
			fmt.Printf("listen %s, dial %s: %q %v\n", tc.listen, addr, got[:], err)
			if err != nil || string(got[:]) != "ok" {
				ok = false
			}
		}
		l.Close()
	}
	return ok
}
