package dockerapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// TestExecAttach: the exec start asks for the connection (Upgrade: tcp),
// and the connection the engine hands over carries writes to the command's
// stdin and its multiplexed output back; an engine that answers without
// handing it over is an error, and so is its refusal.
func TestExecAttach(t *testing.T) {
	f, c := newFake(t, "1.41")
	f.handle("POST /exec/x1/start", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "tcp" || r.Header.Get("Connection") != "Upgrade" {
			http.Error(w, "not an upgrade", http.StatusBadRequest)
			return
		}
		io.Copy(io.Discard, r.Body) // the start's JSON, before the stream
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		rw.Flush()
		// Echo one line of stdin as a stdout frame.
		line, _ := bufio.NewReader(rw).ReadString('\n')
		rw.Write(frame(1, line))
		rw.Flush()
	})
	f.handle("POST /exec/x2/start", answer(200, "application/vnd.docker.raw-stream", ""))
	f.handle("POST /exec/x3/start", answer(404, "application/json", `{"message":"No such exec instance"}`))
	ctx := context.Background()
	conn, err := c.ExecAttach(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatal(err)
	}
	out := dockerapi.NewBuffer(1 << 10)
	if err := dockerapi.Demux(conn, out, nil); err != nil || out.String() != "hello\n" {
		t.Errorf("echo through the attached exec = %q, %v; want %q", out.String(), err, "hello\n")
	}
	if _, err := c.ExecAttach(ctx, "x2"); err == nil {
		t.Error("ExecAttach without a handed-over connection succeeded")
	}
	if _, err := c.ExecAttach(ctx, "x3"); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("ExecAttach of a missing exec = %v; want ErrNotFound", err)
	}
}
