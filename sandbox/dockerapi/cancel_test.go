package dockerapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// promptly is how soon a call must return once its context is cancelled.
// Generous for a loaded machine; a call that ignores its context hangs
// forever against these handlers, so the bound only has to be finite.
const promptly = 5 * time.Second

// forever returns a handler that answers 200 and writes chunk, flushed,
// every millisecond until the client goes away.
func forever(ctype string, chunk []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			fl.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}
}

// hijackForever answers like the engine's exec start: a 200 header on a
// hijacked connection, then raw frames until the client hangs up.
func hijackForever(chunk []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		// Hijacked connections outlive Server.Close; bound this one.
		conn.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n"); err != nil {
			return
		}
		for {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// silent answers with a flushed 200 header and then nothing, like the
// engine's wait; or, with header false, does not answer at all.
func silent(header bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if header {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

func TestCancelMidStream(t *testing.T) {
	out := frames(frame(1, strings.Repeat("o", 1000)), frame(2, "e"))
	tests := []struct {
		name    string
		pattern string
		handler http.HandlerFunc
		// call runs until ctx ends; progress reports that data has arrived.
		call func(ctx context.Context, c *dockerapi.Client, progress func()) error
	}{
		{"logs follow", "GET /containers/c1/logs", forever("application/vnd.docker.multiplexed-stream", out),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				w := &notifyWriter{w: dockerapi.NewBuffer(100), f: progress}
				return c.ContainerLogs(ctx, "c1", dockerapi.LogsOptions{Stdout: true, Follow: true}, w, nil)
			}},
		{"exec start hijacked", "POST /exec/e1/start", hijackForever(out),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				w := &notifyWriter{w: dockerapi.NewBuffer(100), f: progress}
				return c.ExecStart(ctx, "e1", w, nil)
			}},
		{"events", "GET /events", forever("application/json", []byte(`{"Type":"container","Action":"start","Actor":{"ID":"c1"},"timeNano":1}`+"\n")),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				s, err := c.Events(ctx, dockerapi.EventOptions{})
				if err != nil {
					return err
				}
				defer s.Close()
				for {
					e, err := s.Next()
					if err != nil {
						return err
					}
					if e.Actor.ID == "c1" {
						progress()
					}
				}
			}},
		{"pull progress", "POST /images/create", forever("application/json", []byte(`{"status":"Downloading","id":"abc"}`+"\n")),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				progress() // nothing reaches the caller before the end
				return c.ImagePull(ctx, "busybox:latest")
			}},
		{"archive get", "GET /containers/c1/archive", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Docker-Container-Path-Stat", "eyJuYW1lIjoiZXRjIn0=") // {"name":"etc"}
			forever("application/x-tar", make([]byte, 512))(w, r)
		}, func(ctx context.Context, c *dockerapi.Client, progress func()) error {
			rc, _, err := c.ArchiveGet(ctx, "c1", "/etc")
			if err != nil {
				return err
			}
			defer rc.Close()
			progress()
			_, err = io.Copy(io.Discard, rc)
			return err
		}},
		{"wait", "POST /containers/c1/wait", silent(true),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				progress()
				_, err := c.ContainerWait(ctx, "c1", dockerapi.WaitNextExit)
				return err
			}},
		{"engine never answers", "POST /containers/c1/start", silent(false),
			func(ctx context.Context, c *dockerapi.Client, progress func()) error {
				progress()
				return c.ContainerStart(ctx, "c1")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t, "1.41")
			f.handle(tt.pattern, tt.handler)
			if err := c.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			var once bool
			progress := func() {
				if !once {
					once = true
					close(started)
				}
			}
			done := make(chan error, 1)
			go func() { done <- tt.call(ctx, c, progress) }()
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("call ended before cancel: %v", err)
			}
			time.Sleep(20 * time.Millisecond) // let the call block or stream
			select {
			case err := <-done:
				t.Fatalf("call ended before cancel: %v", err)
			default:
			}
			cancel()
			t0 := time.Now()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("call = %v; want context.Canceled", err)
				}
				t.Logf("returned %v after cancel", time.Since(t0))
			case <-time.After(promptly):
				t.Fatalf("call still running %v after cancel", promptly)
			}
		})
	}
}

// notifyWriter calls f after each write.
type notifyWriter struct {
	w io.Writer
	f func()
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	defer n.f()
	return n.w.Write(p)
}

// TestCancelBeforeCall checks a call with a dead context does not reach the
// engine.
func TestCancelBeforeCall(t *testing.T) {
	f, c := newFake(t, "1.41")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping = %v; want context.Canceled", err)
	}
	if got := f.requests(); len(got) != 0 {
		t.Errorf("engine saw %q", got)
	}
}
