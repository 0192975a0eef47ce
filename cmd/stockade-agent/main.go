// Command stockade-agent is the resident exec agent of Docker sandboxes
// (package internal/agent has the logic, the threat model and the
// protocol). The backend places it read-only in every sandbox and starts it
// as the sandbox user through engine execs whose stdin and stdout are
// channels:
//
//	stockade-agent serve MARKER    serve commands on stdin and stdout
//	stockade-agent attach MARKER   relay stdin and stdout to the user's
//	                               process daemon, starting it first when
//	                               none runs
//	stockade-agent procd           the process daemon (started by attach,
//	                               through spawn, outside attach's tree)
//	stockade-agent spawn           start procd in a session of its own and
//	                               exit
//
// MARKER is only there to be found in its argv (container.MarkerArg), so
// the host can kill it through the engine. The daemon carries none: it
// outlives the channels, and the kill of a channel's relay (a tree kill)
// does not reach it, since it is not the relay's descendant.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/stockade/stockade/internal/agent"
)

func main() {
	// One thread runs Go code: the agent shares the sandbox's pids limit.
	runtime.GOMAXPROCS(1)
	if err := agent.Harden(); err != nil {
		fmt.Fprintln(os.Stderr, "stockade-agent:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) == 2 && args[0] == "serve":
		err = agent.Serve(ctx, stdin, stdout, os.Environ())
	case len(args) == 2 && args[0] == "attach":
		c, derr := agent.DialProcs(func() error { return self("spawn").Run() })
		if derr != nil {
			err = derr
			break
		}
		in, out := stdin, stdout
		if in == io.Reader(os.Stdin) {
			in = pollable(0)
		}
		if out == io.Writer(os.Stdout) {
			out = pollable(1)
		}
		err = agent.Relay(c, in, out)
	case len(args) == 1 && args[0] == "procd":
		signal.Ignore(syscall.SIGHUP)
		err = agent.NewDaemon(os.Environ()).Listen(ctx, agent.ProcSocket(os.Getuid()))
	case len(args) == 1 && args[0] == "spawn":
		cmd := self("procd")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
	default:
		fmt.Fprintln(stderr, "usage: stockade-agent serve|attach MARKER, or stockade-agent procd|spawn")
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "stockade-agent:", err)
		return 1
	}
	return 0
}

// self is this program run with args, its stdio /dev/null.
func self(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	return &exec.Cmd{Path: exe, Args: append([]string{exe}, args...), Dir: "/"}
}

// pollable returns the file of standard descriptor fd in Go's poller: with
// one thread for Go code, a read blocked in a plain syscall holds that
// thread until the runtime takes it back (up to milliseconds), which every
// relayed frame would wait for.
func pollable(fd int) *os.File {
	syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), "relay")
}
