package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
)

func TestImageBuildTwiceSameID(t *testing.T) {
	enginetest.Client(t) // skips, or fails under STOCKADE_REQUIRE_ENGINE=1
	ctx, cancel := context.WithTimeout(context.Background(), 2*imageBuildTimeout)
	defer cancel()
	build := func() buildOutput {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"image", "build", "-json"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("stockade image build -json: exit %d, stderr:\n%s", code, stderr.String())
		}
		var out buildOutput
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("stockade image build -json printed %q: %v", stdout.String(), err)
		}
		return out
	}
	start := time.Now()
	first := build()
	t.Logf("first: %v, loaded %v", time.Since(start), first.Loaded)
	start = time.Now()
	second := build()
	t.Logf("second: %v, loaded %v", time.Since(start), second.Loaded)
	if !strings.HasPrefix(first.ID, "sha256:") || first.ID != second.ID {
		t.Errorf("image IDs %q, then %q; want the same sha256", first.ID, second.ID)
	}
	if second.Loaded {
		t.Error("second build loaded the image again")
	}

	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"image", "list"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("stockade image list: exit %d, stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), imageShortID(first.ID)) {
		t.Errorf("stockade image list does not show %s:\n%s", first.ID, stdout.String())
	}
}

func TestImageUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"image"}, exitUnsupported, "want a subcommand"},
		{[]string{"image", "frob"}, exitUnsupported, "unknown subcommand"},
		{[]string{"image", "list", "-goroot", "/x"}, exitUnsupported, "build only"},
		{[]string{"image", "build", "-base", "-goroot", "/x"}, exitUnsupported, "exclude"},
		{[]string{"image", "build", "-gate", "-base"}, exitUnsupported, "-gate excludes"},
		{[]string{"image", "build", "-no-busybox", "-busybox", "/x"}, exitUnsupported, "exclude"},
		{[]string{"image", "build", "-no-ca-bundle", "-ca-bundle", "/x"}, exitUnsupported, "exclude"},
		{[]string{"image", "list", "-no-ca-bundle"}, exitUnsupported, "build only"},
		{[]string{"image", "list", "-cgo=false"}, exitUnsupported, "build only"},
		{[]string{"image", "build", "-go", "1.27.3", "-goroot", "/x"}, exitUnsupported, "-go excludes"},
		{[]string{"image", "build", "-go", "1.27.3", "-base"}, exitUnsupported, "-go excludes"},
		{[]string{"image", "build", "-go", "1.27"}, exitUnsupported, "want a release such as 1.27.3"},
		{[]string{"image", "build", "extra"}, exitUnsupported, "unexpected arguments"},
		{[]string{"image", "build", "-h"}, exitOK, "stockade image build [-goroot DIR | -go RELEASE"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("stockade %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr.String(), tc.code, tc.err)
		}
	}
}
