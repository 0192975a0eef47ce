package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/gate"
)

func TestRun(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"usage", []string{"bogus"}, nil, 2, "usage"},
		{"bad allowed host", nil, map[string]string{gate.EnvAllow: "allowed.test."}, 1, "malformed host"},
		{"bad private range", nil, map[string]string{gate.EnvPrivate: "10.0.0.0"}, 1, gate.EnvPrivate},
		{"telemetry asked", nil, map[string]string{gate.EnvOTel: "http://collector:4318"}, 1, "OTLP"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, env(tc.env), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: run = %d, %q; want %d and %q", tc.name, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}
