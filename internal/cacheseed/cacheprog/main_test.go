package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// client drives serve as the go command does.
type client struct {
	t    *testing.T
	msgs chan string // written to serve in order
	dec  *json.Decoder
	id   int64
}

func start(t *testing.T, c *cache) *client {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := c.serve(inR, outW)
		inR.Close() // fails writes nobody will read
		outW.Close()
		done <- err
	}()
	cl := &client{t: t, msgs: make(chan string, 1<<12), dec: json.NewDecoder(bufio.NewReader(outR))}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for m := range cl.msgs {
			inW.Write([]byte(m))
		}
		inW.Close()
	}()
	var hello response
	if err := cl.dec.Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hello.KnownCommands, ","); got != "get,put,close" {
		t.Fatalf("KnownCommands = %q", got)
	}
	t.Cleanup(func() {
		close(cl.msgs)
		<-wrote
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return cl
}

// send writes a request and waits for its response.
func (c *client) send(cmd string, action, output []byte, body []byte) response {
	c.t.Helper()
	id := c.write(cmd, action, output, body)
	res := c.read()
	if res.ID != id {
		c.t.Fatalf("response ID %d; want %d", res.ID, id)
	}
	return res
}

// write writes a request the way cmd/go does: the JSON object, a newline, an
// empty line, then for a put the base64 body as a JSON string. It returns
// the request's ID.
func (c *client) write(cmd string, action, output []byte, body []byte) int64 {
	c.id++
	req := map[string]any{"ID": c.id, "Command": cmd}
	if action != nil {
		req["ActionID"] = action
	}
	if output != nil {
		req["OutputID"] = output
	}
	if len(body) > 0 {
		req["BodySize"] = len(body)
	}
	b, _ := json.Marshal(req)
	msg := string(b) + "\n\n"
	if len(body) > 0 {
		msg += `"` + base64.StdEncoding.EncodeToString(body) + "\"\n"
	}
	c.raw(msg)
	return c.id
}

// raw writes msg without waiting for serve to read it.
func (c *client) raw(msg string) {
	c.msgs <- msg
}

// read returns the next response.
func (c *client) read() response {
	c.t.Helper()
	var res response
	if err := c.dec.Decode(&res); err != nil {
		c.t.Fatal(err)
	}
	return res
}

func id(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

// seedEntry writes an entry in the go command's own layout.
func seedEntry(t *testing.T, root string, action []byte, body []byte) []byte {
	out := sha256.Sum256(body)
	write := func(name string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	write(name(root, out[:], "d"), body)
	write(name(root, action, "a"), []byte(fmt.Sprintf("v1 %x %x %20d %20d\n", action, out, len(body), int64(1700000000000000000))))
	return out[:]
}

func TestServe(t *testing.T) {
	seed, dir := t.TempDir(), t.TempDir()
	now := time.Unix(1800000000, 0)
	seedOut := seedEntry(t, seed, id("seeded"), []byte("compiled fmt"))
	cc := newCache(seed, dir)
	cc.now = func() time.Time { return now }
	c := start(t, cc)

	// A miss.
	if res := c.send("get", id("nothing"), nil, nil); !res.Miss || res.Err != "" {
		t.Errorf("get of an unknown action = %+v; want a miss", res)
	}
	// A hit in the seed answers with the seed's file.
	res := c.send("get", id("seeded"), nil, nil)
	if res.Miss || !bytes.Equal(res.OutputID, seedOut) || res.Size != 12 || res.DiskPath != name(seed, seedOut, "d") {
		t.Errorf("get of a seeded action = %+v", res)
	}
	if res.Time == nil || res.Time.UnixNano() != 1700000000000000000 {
		t.Errorf("Time = %v; want the seed entry's", res.Time)
	}
	// A put goes to the fresh cache, and a get finds it there.
	body := []byte("compiled main")
	out := sha256.Sum256(body)
	res = c.send("put", id("new"), out[:], body)
	if res.Err != "" || res.DiskPath != name(dir, out[:], "d") {
		t.Fatalf("put = %+v", res)
	}
	if got, _ := os.ReadFile(res.DiskPath); !bytes.Equal(got, body) {
		t.Errorf("body on disk = %q; want %q", got, body)
	}
	res = c.send("get", id("new"), nil, nil)
	if res.Miss || res.DiskPath != name(dir, out[:], "d") || res.Time == nil || !res.Time.Equal(now) {
		t.Errorf("get after put = %+v", res)
	}
	// A put of a body the seed already has points at the seed's copy and
	// writes only the index entry.
	res = c.send("put", id("same body"), seedOut, []byte("compiled fmt"))
	if res.Err != "" || res.DiskPath != name(seed, seedOut, "d") {
		t.Errorf("put of a seeded body = %+v", res)
	}
	if _, err := os.Stat(name(dir, seedOut, "d")); err == nil {
		t.Error("the seeded body was copied into the fresh cache")
	}
	// ... and a get finds it: the go command reads back what it just put
	// (go list -compiled puts a package's srcfiles list and reads it at
	// once; a list that happens to equal one in the seed must not miss).
	if res = c.send("get", id("same body"), nil, nil); res.Miss || res.DiskPath != name(seed, seedOut, "d") || res.Size != 12 {
		t.Errorf("get after a put of a seeded body = %+v; want the seed's copy", res)
	}
	// An empty body.
	empty := sha256.Sum256(nil)
	if res = c.send("put", id("empty"), empty[:], nil); res.Err != "" {
		t.Errorf("put of an empty body = %+v", res)
	}
	if res = c.send("get", id("empty"), nil, nil); res.Miss || res.Size != 0 {
		t.Errorf("get of an empty body = %+v", res)
	}
	// The fresh cache shadows the seed (what the validation wrote wins,
	// within that validation).
	c.send("put", id("seeded"), out[:], body)
	if res = c.send("get", id("seeded"), nil, nil); res.DiskPath != name(dir, out[:], "d") {
		t.Errorf("fresh entry does not shadow the seed: %+v", res)
	}
	// Malformed entries are misses.
	os.MkdirAll(filepath.Dir(name(dir, id("bad"), "a")), 0o755)
	os.WriteFile(name(dir, id("bad"), "a"), []byte("v1 garbage\n"), 0o644)
	if res = c.send("get", id("bad"), nil, nil); !res.Miss {
		t.Errorf("malformed entry = %+v; want a miss", res)
	}
	// An entry whose body is missing or has the wrong size is a miss.
	gone := seedEntry(t, dir, id("gone"), []byte("short"))
	os.Remove(name(dir, gone, "d"))
	if res = c.send("get", id("gone"), nil, nil); !res.Miss {
		t.Errorf("entry without body = %+v; want a miss", res)
	}
	if res = c.send("get", []byte("short"), nil, nil); res.Err == "" {
		t.Errorf("bad action ID = %+v; want an error", res)
	}
	if res = c.send("close", nil, nil, nil); res.Err != "" {
		t.Errorf("close = %+v", res)
	}
}

// TestPutReplacesPlantedLinks: a put never writes through what the
// validation planted in its cache.
func TestPutReplacesPlantedLinks(t *testing.T) {
	seed, dir, victim := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	body := []byte("new body")
	out := sha256.Sum256(body)
	a := name(dir, id("x"), "a")
	os.MkdirAll(filepath.Dir(a), 0o755)
	os.MkdirAll(filepath.Dir(name(dir, out[:], "d")), 0o755)
	if err := os.Symlink(victim, a); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, name(dir, out[:], "d")); err != nil {
		t.Fatal(err)
	}
	c := start(t, newCache(seed, dir))
	if res := c.send("put", id("x"), out[:], body); res.Err != "" {
		t.Fatal(res.Err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("victim = %q; the put wrote through a planted link", got)
	}
	if res := c.send("get", id("x"), nil, nil); res.Miss {
		t.Error("get after put missed")
	}
}

// TestGoCommand runs the real go command with the program as GOCACHEPROG
// over a seed the go command filled, and checks it compiles nothing the
// seed holds.
func TestGoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "cacheprog")
	if out, err := exec.Command(goBin, "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	mod := filepath.Join(tmp, "mod")
	os.MkdirAll(mod, 0o755)
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/m\n\ngo 1.24\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "m.go"), []byte("package m\n\nimport \"errors\"\n\nvar E = errors.New(\"e\")\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "m_test.go"), []byte("package m\n\nimport \"testing\"\n\nfunc TestE(t *testing.T) {}\n"), 0o644)
	seed, fresh := filepath.Join(tmp, "seed"), filepath.Join(tmp, "fresh")
	run := func(env []string, args ...string) string {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOPROXY=off"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}, {"test", "-count=1", "./..."}} {
		run([]string{"GOCACHE=" + seed}, args...)
	}
	env := []string{"GOCACHE=" + fresh, "GOCACHEPROG=" + prog + " " + seed}
	out := run(env, "build", "-x", "./...")
	if strings.Contains(out, "/compile ") {
		t.Errorf("go build compiled with a seeded cache:\n%s", out)
	}
	out = run(env, "vet", "-x", "./...")
	if strings.Contains(out, "/vet ") {
		t.Errorf("go vet vetted with a seeded cache:\n%s", out)
	}
	run(env, "test", "-count=1", "./...")
	// The seed the go command filled is unchanged in size: nothing was
	// written there.
	n := 0
	filepath.WalkDir(fresh, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "-d") {
			n++
		}
		return nil
	})
	if n > 10 {
		t.Errorf("the fresh cache got %d bodies; the seed should have served nearly all", n)
	}
}
