package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string // prefix
		stderr string // substring
	}{
		{"usage", nil, "", 2, "", "usage: stockade-agent serve"},
		{"other command", []string{"run", "x"}, "", 2, "", "usage"},
		{"serve until stdin ends", []string{"serve", "stockade-execM"}, "", 0, "H\x00\x00\x00\x00", ""},
		{"serve refuses a bad frame", []string{"serve", "stockade-execM"}, "Z\x00\x00\x00\x01\x00\x00\x00\x00", 1, "H", "protocol error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q..., ...%q...", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
