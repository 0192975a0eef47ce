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
	"slices"
	"strings"
	"sync"
	"syscall"
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
		go io.Copy(io.Discard, outR) // responses the test did not read
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
func seedEntry(t testing.TB, root string, action []byte, body []byte) []byte {
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
	seed := filepath.Join(tmp, "seed")
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
	// The seed as a seed build leaves it has an index; one without is
	// read entry by entry at startup. Each run starts a fresh cache.
	for _, mode := range []string{"without index", "with index"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "with index" {
				if out, err := exec.Command(prog, "-index", seed).CombinedOutput(); err != nil {
					t.Fatalf("cacheprog -index: %v\n%s", err, out)
				}
			}
			fresh := filepath.Join(t.TempDir(), "fresh")
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
			// The seed served nearly every body: the fresh cache got
			// only the test run's own.
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
			// A second build in the same fresh cache is all hits too.
			if out := run(env, "build", "-x", "./..."); strings.Contains(out, "/compile ") {
				t.Errorf("a second go build compiled:\n%s", out)
			}
		})
	}
}

// fifo plants a named pipe as the fresh cache's index entry for action: a
// get of it blocks in open until release is called, then misses.
func fifo(t *testing.T, dir string, action []byte) (release func()) {
	t.Helper()
	p := name(dir, action, "a")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
		})
	}
	t.Cleanup(release) // before serve's cleanup: cleanups run last first
	return release
}

// quiet checks that no response arrives within a short time, and returns a
// function that waits for the one that does.
func (c *client) quiet(what string) func() response {
	c.t.Helper()
	ch := make(chan response, 1)
	go func() {
		var res response
		c.dec.Decode(&res)
		ch <- res
	}()
	select {
	case res := <-ch:
		c.t.Fatalf("%s: got response %+v; want none yet", what, res)
	case <-time.After(200 * time.Millisecond):
	}
	return func() response { return <-ch }
}

// TestConcurrent: gets and puts do not wait behind a get that blocks, and
// close is answered after every request before it.
func TestConcurrent(t *testing.T) {
	seed, dir := t.TempDir(), t.TempDir()
	const n = 50
	outs := map[string][]byte{}
	for i := range n {
		k := fmt.Sprint("seeded ", i)
		outs[k] = seedEntry(t, seed, id(k), []byte(k))
	}
	release := fifo(t, dir, id("slow"))
	c := start(t, newCache(seed, dir))

	slow := c.write("get", id("slow"), nil, nil)
	want := map[int64]string{}
	for i := range n {
		k := fmt.Sprint("seeded ", i)
		want[c.write("get", id(k), nil, nil)] = k
		body := []byte(fmt.Sprint("put ", i))
		out := sha256.Sum256(body)
		want[c.write("put", id(string(body)), out[:], body)] = "put"
	}
	for range len(want) {
		res := c.read()
		k, ok := want[res.ID]
		if !ok {
			t.Fatalf("response %+v; want one of the requests after the blocked get", res)
		}
		delete(want, res.ID)
		switch {
		case res.Err != "":
			t.Errorf("request %d (%s): %s", res.ID, k, res.Err)
		case k != "put" && (res.Miss || !bytes.Equal(res.OutputID, outs[k])):
			t.Errorf("get %s = %+v; want a seed hit", k, res)
		}
	}
	closeID := c.write("close", nil, nil, nil)
	next := c.quiet("close with a get in flight")
	release()
	if res := next(); res.ID != slow || !res.Miss {
		t.Errorf("first response after release = %+v; want the blocked get (%d), a miss", res, slow)
	}
	if res := c.read(); res.ID != closeID {
		t.Errorf("last response = %+v; want close's (%d)", res, closeID)
	}
}

// TestInFlightBound: with every slot taken, the next request is not read.
func TestInFlightBound(t *testing.T) {
	seed, dir := t.TempDir(), t.TempDir()
	seedEntry(t, seed, id("seeded"), []byte("x"))
	r1, r2 := fifo(t, dir, id("slow 1")), fifo(t, dir, id("slow 2"))
	cc := newCache(seed, dir)
	cc.inFlight = 2
	c := start(t, cc)
	s1 := c.write("get", id("slow 1"), nil, nil)
	c.write("get", id("slow 2"), nil, nil)
	hit := c.write("get", id("seeded"), nil, nil)
	next := c.quiet("a third request with two slots taken")
	r1()
	if res := next(); res.ID != s1 {
		t.Errorf("response %+v; want the released get %d", res, s1)
	}
	if res := c.read(); res.ID != hit || res.Miss {
		t.Errorf("response %+v; want the seed hit %d", res, hit)
	}
	r2()
	c.read()
}

// TestIndex: the seed's index lists the entries whose bodies are there,
// and a get answers from it, not from the seed's files.
func TestIndex(t *testing.T) {
	seed := t.TempDir()
	good := seedEntry(t, seed, id("good"), []byte("good body"))
	seedEntry(t, seed, id("empty"), nil)
	gone := seedEntry(t, seed, id("no body"), []byte("gone"))
	os.Remove(name(seed, gone, "d"))
	short := seedEntry(t, seed, id("short body"), []byte("twelve bytes"))
	os.Remove(name(seed, short, "d"))
	os.WriteFile(name(seed, short, "d"), []byte("eleven byte"), 0o444)
	link := seedEntry(t, seed, id("symlinked body"), []byte("linked"))
	os.Remove(name(seed, link, "d"))
	os.Symlink(name(seed, good, "d"), name(seed, link, "d"))
	os.MkdirAll(filepath.Dir(name(seed, id("garbage"), "a")), 0o755)
	os.WriteFile(name(seed, id("garbage"), "a"), []byte("v1 garbage\n"), 0o444)
	other := seedEntry(t, seed, id("other"), []byte("other"))
	// An entry filed under the wrong action ID.
	b, _ := os.ReadFile(name(seed, id("other"), "a"))
	os.WriteFile(name(seed, id("misfiled"), "a"), b, 0o444)
	_ = other

	want := []string{"empty", "good", "other"}
	check := func(t *testing.T, idx *index) {
		t.Helper()
		var got []string
		for _, k := range []string{"good", "empty", "no body", "short body", "symlinked body", "garbage", "other", "misfiled"} {
			if _, ok := idx.entries[[hashSize]byte(id(k))]; ok {
				got = append(got, k)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || len(idx.entries) != len(want) {
			t.Errorf("index holds %q (%d entries); want %q", got, len(idx.entries), want)
		}
		if e := idx.entries[[hashSize]byte(id("good"))]; e.path != name(seed, good, "d") || e.size != 9 || e.time.UnixNano() != 1700000000000000000 {
			t.Errorf("good = %+v", e)
		}
	}
	t.Run("scan", func(t *testing.T) {
		idx, err := loadIndex(seed)
		if err != nil {
			t.Fatal(err)
		}
		check(t, idx)
	})
	if err := writeIndex(seed); err != nil {
		t.Fatal(err)
	}
	t.Run("file", func(t *testing.T) {
		idx, err := loadIndex(seed)
		if err != nil {
			t.Fatal(err)
		}
		check(t, idx)
	})
	t.Run("malformed lines", func(t *testing.T) {
		b, _ := os.ReadFile(filepath.Join(seed, indexFile))
		b = bytes.Replace(b, []byte("v1 "), []byte("v2 "), 1) // the first line is bad
		b = append(b, "v1 cut short\n"...)
		os.WriteFile(filepath.Join(seed, indexFile), b, 0o644)
		idx, err := loadIndex(seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(idx.entries) != len(want)-1 {
			t.Errorf("index of %d entries; want %d", len(idx.entries), len(want)-1)
		}
	})
	t.Run("bad header", func(t *testing.T) {
		os.WriteFile(filepath.Join(seed, indexFile), []byte("something else\n"), 0o644)
		if _, err := loadIndex(seed); err == nil {
			t.Error("loadIndex of a bad header succeeded")
		}
		// The program then reads the seed on disk, as the fresh cache.
		c := start(t, newCache(seed, t.TempDir()))
		if res := c.send("get", id("good"), nil, nil); res.Miss {
			t.Errorf("get without an index = %+v; want a hit", res)
		}
	})
	t.Run("hit from memory", func(t *testing.T) {
		writeIndex(seed)
		c := start(t, newCache(seed, t.TempDir()))
		// The seed's index entry is gone from disk after startup: only
		// the loaded index can answer.
		os.Remove(name(seed, id("good"), "a"))
		if res := c.send("get", id("good"), nil, nil); res.Miss || res.DiskPath != name(seed, good, "d") {
			t.Errorf("get = %+v; want a hit from the loaded index", res)
		}
	})
}

// TestFreshWinsOverSeed: what the validation put wins over the seed, and a
// fresh entry may point at a body only the seed has.
func TestFreshWinsOverSeed(t *testing.T) {
	seed, dir := t.TempDir(), t.TempDir()
	seedOut := seedEntry(t, seed, id("a"), []byte("seed body"))
	freshOut := seedEntry(t, dir, id("a"), []byte("fresh body"))
	// A fresh entry for a body that is only in the seed.
	seedEntry(t, seed, id("b"), []byte("shared"))
	shared := sha256.Sum256([]byte("shared"))
	os.MkdirAll(filepath.Dir(name(dir, id("c"), "a")), 0o755)
	os.WriteFile(name(dir, id("c"), "a"), fmt.Appendf(nil, "v1 %x %x %20d %20d\n", id("c"), shared, 6, 1), 0o644)
	if err := writeIndex(seed); err != nil {
		t.Fatal(err)
	}
	c := start(t, newCache(seed, dir))
	for _, tt := range []struct {
		action string
		want   string
	}{
		{"a", name(dir, freshOut, "d")},
		{"c", name(seed, shared[:], "d")},
	} {
		if res := c.send("get", id(tt.action), nil, nil); res.Miss || res.DiskPath != tt.want {
			t.Errorf("get %s = %+v; want DiskPath %s", tt.action, res, tt.want)
		}
	}
	_ = seedOut
}

// TestMalformedRequests: a stream serve cannot read fails it; an unknown
// command is an error response.
func TestMalformedRequests(t *testing.T) {
	seed, dir := t.TempDir(), t.TempDir()
	for _, tt := range []struct {
		name, in string
		wantErr  bool
		wantOut  string // in the output
	}{
		{"not JSON", "{nope\n", true, ""},
		{"negative body", `{"ID":1,"Command":"put","ActionID":"` + b64(id("a")) + `","OutputID":"` + b64(id("o")) + `","BodySize":-1}` + "\n", true, ""},
		{"body not a string", `{"ID":1,"Command":"put","ActionID":"` + b64(id("a")) + `","OutputID":"` + b64(id("o")) + `","BodySize":3}` + "\n\nabc\n", true, ""},
		{"body of the wrong size", `{"ID":1,"Command":"put","ActionID":"` + b64(id("a")) + `","OutputID":"` + b64(id("o")) + `","BodySize":3}` + "\n\n\"" + b64([]byte("abcd")) + "\"\n", true, ""},
		{"body cut short", `{"ID":1,"Command":"put","ActionID":"` + b64(id("a")) + `","OutputID":"` + b64(id("o")) + `","BodySize":3}` + "\n\n", true, ""},
		{"unknown command", `{"ID":7,"Command":"get2"}` + "\n", false, `"Err":"unknown command \"get2\""`},
		{"bad action ID", `{"ID":8,"Command":"get","ActionID":"` + b64([]byte("short")) + `"}` + "\n", false, `"Err":"bad action ID"`},
		{"bad put IDs", `{"ID":9,"Command":"put","ActionID":"` + b64([]byte("short")) + `"}` + "\n", false, `"Err":"bad action or output ID"`},
		{"end without close", `{"ID":1,"Command":"get","ActionID":"` + b64(id("a")) + `"}` + "\n", false, `"Miss":true`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := newCache(seed, dir).serve(strings.NewReader(tt.in), &out)
			if (err != nil) != tt.wantErr {
				t.Errorf("serve = %v; want error %v", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output %s; want %s in it", out.String(), tt.wantOut)
			}
		})
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// BenchmarkGet feeds serve get requests for seed hits from workers that
// each wait for their answer, as the go command's builder goroutines do,
// over real pipes: the seed read on disk per lookup, one request at a time
// (the program before the index), against the loaded index and concurrent
// answers.
func BenchmarkGet(b *testing.B) {
	const entries, workers = 2000, 4
	seed := b.TempDir()
	ids := make([][]byte, entries)
	for i := range ids {
		ids[i] = id(fmt.Sprint(i))
		seedEntry(b, seed, ids[i], []byte(fmt.Sprint("body ", i)))
	}
	if err := writeIndex(seed); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name     string
		index    bool
		inFlight int
	}{
		{"disk,sequential", false, 1},
		{"disk,concurrent", false, 0},
		{"index,sequential", true, 1},
		{"index,concurrent", true, 0},
	} {
		b.Run(mode.name, func(b *testing.B) {
			c := newCache(seed, b.TempDir())
			if !mode.index {
				c.seedIndex = nil
			}
			c.inFlight = mode.inFlight
			benchGets(b, c, ids, workers)
		})
	}
}

func benchGets(b *testing.B, c *cache, ids [][]byte, workers int) {
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.serve(inR, outW); outW.Close() }()
	var mu sync.Mutex // guards waiting and the writes
	waiting := map[int64]chan response{}
	go func() {
		dec := json.NewDecoder(bufio.NewReader(outR))
		for {
			var res response
			if dec.Decode(&res) != nil {
				return
			}
			mu.Lock()
			ch := waiting[res.ID]
			delete(waiting, res.ID)
			mu.Unlock()
			if ch != nil {
				ch <- res
			}
		}
	}()
	var next int64
	get := func(action []byte) response {
		ch := make(chan response, 1)
		mu.Lock()
		next++
		waiting[next] = ch
		msg, _ := json.Marshal(request{ID: next, Command: "get", ActionID: action})
		inW.Write(append(msg, '\n', '\n'))
		mu.Unlock()
		return <-ch
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += workers {
				if res := get(ids[i%len(ids)]); res.Miss {
					b.Error("miss")
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	inW.Close()
	if err := <-done; err != nil {
		b.Error(err)
	}
	inR.Close()
	outR.Close()
}
