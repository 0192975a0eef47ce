package dockerapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

func TestImageLoadProgress(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantIDs   []string
		wantTags  []string
		streamErr string // want a *StreamError with this message
		wantErr   bool   // want some other error
	}{
		{name: "empty"},
		{name: "tag", body: `{"stream":"Loaded image: stockade/base:local\n"}` + "\n",
			wantTags: []string{"stockade/base:local"}},
		{name: "id", body: `{"stream":"Loaded image ID: sha256:0123abcd\n"}`,
			wantIDs: []string{"sha256:0123abcd"}},
		{name: "several, no separators", body: `{"stream":"Loaded image: a:1\n"}{"stream":"Loaded image: b:2\n"}{"stream":"Loaded image ID: sha256:ff\n"}`,
			wantIDs: []string{"sha256:ff"}, wantTags: []string{"a:1", "b:2"}},
		{name: "progress lines are ignored", body: `{"status":"Loading layer","progressDetail":{"current":512,"total":1024},"id":"abc"}` + "\n" +
			`{"stream":"The image a:1 already exists, renaming the old one with ID sha256:01 to empty string\n"}` + "\n" +
			`{"stream":"Loaded image: a:1\n"}` + "\n", wantTags: []string{"a:1"}},
		{name: "error after success", body: `{"stream":"Loaded image: a:1\n"}` + "\n" +
			`{"errorDetail":{"message":"open /var/lib/docker/tmp/x: no such file or directory"},"error":"open /var/lib/docker/tmp/x: no such file or directory"}` + "\n",
			wantTags: []string{"a:1"}, streamErr: "open /var/lib/docker/tmp/x: no such file or directory"},
		{name: "error only", body: `{"error":"invalid tar header"}`, streamErr: "invalid tar header"},
		{name: "errorDetail wins", body: `{"error":"short","errorDetail":{"message":"the long message"}}`, streamErr: "the long message"},
		{name: "stops at the error", body: `{"error":"first"}{"stream":"Loaded image: late:1\n"}`, streamErr: "first"},
		{name: "not json", body: "Loaded image: a:1\n", wantErr: true},
		{name: "cut json", body: `{"stream":"Loaded image: a:1\n"}{"stre`, wantTags: []string{"a:1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			f.handle("POST /images/load", answer(200, "application/json", tt.body))
			res, err := c.ImageLoad(context.Background(), strings.NewReader("tar"))
			var se *dockerapi.StreamError
			switch {
			case tt.streamErr != "":
				if !errors.As(err, &se) || se.Message != tt.streamErr || se.Op != "load" {
					t.Errorf("ImageLoad = %v; want StreamError %q", err, tt.streamErr)
				}
			case tt.wantErr:
				if err == nil || errors.As(err, &se) {
					t.Errorf("ImageLoad = %v; want a decode error", err)
				}
			case err != nil:
				t.Errorf("ImageLoad = %v", err)
			}
			if !slices.Equal(res.IDs, tt.wantIDs) || !slices.Equal(res.Tags, tt.wantTags) {
				t.Errorf("ImageLoad = %+v; want IDs %q, tags %q", res, tt.wantIDs, tt.wantTags)
			}
		})
	}
}

func TestImageLoadSendsBody(t *testing.T) {
	f, c := newFake(t, "1.41")
	var got []byte
	f.handle("POST /images/load", func(w http.ResponseWriter, r *http.Request) {
		var err error
		if got, err = io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-tar" {
			t.Errorf("Content-Type = %q", ct)
		}
		w.Write([]byte(`{"stream":"Loaded image: a:1\n"}`))
	})
	body := strings.Repeat("layer", 100000)
	if _, err := c.ImageLoad(context.Background(), strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if string(got) != body {
		t.Errorf("engine got %d bytes; want %d", len(got), len(body))
	}
}

func TestImagePullProgress(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantErr  string // StreamError message; "" means success
		notFound bool   // want errors.Is(err, ErrNotFound)
	}{
		{name: "ok", body: `{"status":"Pulling from library/busybox","id":"latest"}` + "\n" + `{"status":"Status: Downloaded newer image for busybox:latest"}` + "\n"},
		{name: "manifest unknown", body: `{"status":"Pulling from library/nope","id":"latest"}` + "\n" +
			`{"errorDetail":{"message":"manifest for nope:latest not found: manifest unknown: manifest unknown"},"error":"manifest for nope:latest not found: manifest unknown: manifest unknown"}` + "\n",
			wantErr: "manifest for nope:latest not found: manifest unknown: manifest unknown", notFound: true},
		{name: "no repository", body: `{"error":"pull access denied for nope, repository does not exist or may require 'docker login'"}`,
			wantErr: "pull access denied for nope, repository does not exist or may require 'docker login'", notFound: true},
		{name: "network", body: `{"error":"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host"}`,
			wantErr: `Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			f.handle("POST /images/create", answer(200, "application/json", tt.body))
			err := c.ImagePull(context.Background(), "nope:latest")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ImagePull = %v", err)
				}
				return
			}
			var se *dockerapi.StreamError
			if !errors.As(err, &se) || se.Message != tt.wantErr || se.Op != "pull nope:latest" {
				t.Fatalf("ImagePull = %v; want StreamError %q", err, tt.wantErr)
			}
			if errors.Is(err, dockerapi.ErrNotFound) != tt.notFound {
				t.Errorf("errors.Is(%v, ErrNotFound) = %v; want %v", err, !tt.notFound, tt.notFound)
			}
			for _, s := range []error{dockerapi.ErrConflict, dockerapi.ErrEngine, dockerapi.ErrNotRunning} {
				if errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = true", err, s)
				}
			}
		})
	}
}
