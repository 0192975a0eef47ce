package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/docker"
)

// A platform's code is written against Provider and Sandbox; the backend
// (sandbox/docker here, or sandbox/kubernetes) is chosen where the program
// starts. Provision is idempotent for one session ID and spec; what the
// command did is data in the result, an error is the backend's own
// failure. (sandbox/docker's examples run against an engine.)
func ExampleProvider() {
	ctx := context.Background()
	var p sandbox.Provider
	p, err := docker.New(docker.Config{Owner: "my-platform"})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "session-42", Image: "my-sandbox-image:1"})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Reap(ctx, "session-42")
	err = sb.WriteFiles(ctx, []sandbox.FileWrite{{Path: "/workspace/test.sh", Data: []byte("echo ok\n")}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cd /workspace && sh test.sh", Timeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.ExitCode, res.TimedOut, res.Truncated, res.Stdout)
}

// What a session asks for is checked before any engine call: names of
// environment variables, paths, sizes. Each refusal is a sentinel to match
// with errors.Is.
func ExampleValidateEnv() {
	fmt.Println(sandbox.ValidateEnv(map[string]string{"GOFLAGS": "-mod=mod"}))
	err := sandbox.ValidateEnv(map[string]string{"HTTP_PROXY": "http://elsewhere:3128"})
	fmt.Println(errors.Is(err, sandbox.ErrInvalidEnv), err)
	err = sandbox.ValidateEnv(map[string]string{"A=B": "c"})
	fmt.Println(errors.Is(err, sandbox.ErrInvalidEnv))
	// Output:
	// <nil>
	// true sandbox: invalid environment: name "HTTP_PROXY" is reserved for the backend
	// true
}

func ExampleCheckPath() {
	for _, p := range []string{"/workspace/main.go", "relative/x", "/workspace/../etc/passwd"} {
		fmt.Printf("%s: %v\n", p, sandbox.CheckPath(p) == nil)
	}
	// Output:
	// /workspace/main.go: true
	// relative/x: false
	// /workspace/../etc/passwd: false
}

func ExampleCheckWriteSize() {
	fmt.Println(sandbox.CheckWriteSize(1 << 20))
	fmt.Println(errors.Is(sandbox.CheckWriteSize(-1), sandbox.ErrSizeNotALength))
	fmt.Println(errors.Is(sandbox.CheckWriteSize(sandbox.MaxFileBytes+1), sandbox.ErrFileTooLarge))
	// Output:
	// <nil>
	// true
	// true
}
