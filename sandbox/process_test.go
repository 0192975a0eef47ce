package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckProcessRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  ProcessRequest
		want error  // matched with errors.Is; nil with bad set means any error
		bad  string // substring of the error; "" means valid
	}{
		{"command", ProcessRequest{Command: "echo hi"}, nil, ""},
		{"argv with all options", ProcessRequest{Argv: []string{"cat"}, Stdin: true, Dir: "/tmp", Name: "x", BufferBytes: MaxProcessBuffer,
			OutputCap: 1, Terminal: &TerminalSize{Rows: 1, Cols: 1}, Env: map[string]string{"A": "b"}}, nil, ""},
		{"nothing to run", ProcessRequest{}, nil, "Command or Argv"},
		{"both", ProcessRequest{Command: "x", Argv: []string{"x"}}, nil, "not both"},
		{"buffer too large", ProcessRequest{Command: "x", BufferBytes: MaxProcessBuffer + 1}, nil, "BufferBytes"},
		{"negative cap", ProcessRequest{Command: "x", OutputCap: -1}, nil, "negative"},
		{"terminal without size", ProcessRequest{Command: "x", Terminal: &TerminalSize{Rows: 24}}, nil, "rows and columns"},
		{"long name", ProcessRequest{Command: "x", Name: strings.Repeat("n", 257)}, nil, "name"},
		{"command too large", ProcessRequest{Command: strings.Repeat("x", MaxCommandBytes+1)}, ErrCommandTooLarge, "too large"},
		{"relative dir", ProcessRequest{Command: "x", Dir: "tmp"}, nil, "absolute"},
		{"reserved env", ProcessRequest{Command: "x", Env: map[string]string{"STOCKADE_PROC": "1"}}, ErrInvalidEnv, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckProcessRequest(tc.req)
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("CheckProcessRequest = %v; want nil", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("CheckProcessRequest = %v; want an error with %q", err, tc.bad)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("CheckProcessRequest = %v; want %v", err, tc.want)
			}
		})
	}
}

func TestProcessesOfUnsupported(t *testing.T) {
	var sb Sandbox // a backend without processes
	if _, err := ProcessesOf(sb); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "interactive processes") {
		t.Errorf("ProcessesOf = %v; want ErrUnsupported naming the capability", err)
	}
}
