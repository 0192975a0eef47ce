// Command stockade-agent is the resident exec agent of Docker sandboxes
// (package internal/agent has the logic, the threat model and the
// protocol). The backend places it read-only in every sandbox and starts it
// once, as the sandbox user, through an engine exec whose stdin and stdout
// are the channel:
//
//	stockade-agent serve MARKER    serve the host on stdin and stdout
//
// MARKER is only there to be found in its argv (container.MarkerArg), so
// the host can kill it through the engine.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
	if len(args) != 2 || args[0] != "serve" {
		fmt.Fprintln(stderr, "usage: stockade-agent serve MARKER")
		return 2
	}
	if err := agent.Serve(ctx, stdin, stdout, os.Environ()); err != nil {
		fmt.Fprintln(stderr, "stockade-agent:", err)
		return 1
	}
	return 0
}
