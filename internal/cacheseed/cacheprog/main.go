// Command cacheprog is the GOCACHEPROG program of a seeded build cache: a
// two-level cache whose lower level (the seed) is only ever read and whose
// upper level is the validation's own fresh GOCACHE.
//
//	GOCACHEPROG="/stockade/seed/bin/cacheprog /stockade/seed/cache"
//
// Both levels use the go command's own on-disk layout (xx/<action>-a index
// entries and xx/<output>-d bodies), so the seed is an ordinary GOCACHE the
// toolchain filled, and the fresh directory is an ordinary GOCACHE too.
//
// Safety does not rest on this program: the seed is mounted read-only, so
// nothing in the container, this program included, can change it. This
// program only has to be correct: a get answers from the fresh cache, then
// from the seed; a put writes to the fresh cache only, through a temporary
// file and a rename, so a file planted in the fresh cache is replaced, never
// written through.
//
// It uses the standard library only and is built, statically, inside the
// toolchain image by cacheseed.Ensure; it speaks the protocol documented in
// cmd/go/internal/cacheprog (Go 1.24 and later).
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The protocol's messages, as cmd/go/internal/cacheprog defines them.
type request struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type response struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// hashSize is the size of action and output IDs (SHA-256).
const hashSize = 32

// entrySize is the size of an index entry the go command writes:
// "v1 <action hex> <output hex> <size %20d> <unix nanos %20d>\n".
const entrySize = 2 + 1 + 2*hashSize + 1 + 2*hashSize + 1 + 20 + 1 + 20 + 1

// maxBody bounds one put's body, in bytes; the go command's largest outputs
// are linked test binaries, far below it.
const maxBody = 4 << 30

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cacheprog SEEDDIR (run by the go command as GOCACHEPROG; GOCACHE is the writable cache)")
		os.Exit(2)
	}
	dir := os.Getenv("GOCACHE")
	if !filepath.IsAbs(dir) {
		fmt.Fprintln(os.Stderr, "cacheprog: GOCACHE must be an absolute path")
		os.Exit(2)
	}
	c := &cache{seed: filepath.Clean(os.Args[1]), dir: filepath.Clean(dir), now: time.Now}
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cacheprog:", err)
		os.Exit(1)
	}
}

// cache is the two-level cache: seed is read, dir is read and written.
type cache struct {
	seed, dir string
	now       func() time.Time
}

// serve answers requests from r on w until "close" or the end of r. It
// handles one request at a time: the go command allows that, and file
// lookups are fast next to what it does between them.
func (c *cache) serve(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(res *response) error {
		if err := enc.Encode(res); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := send(&response{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			// The go command ends each request with an extra newline.
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			return fmt.Errorf("bad request: %v", err)
		}
		res := &response{ID: req.ID}
		switch req.Command {
		case "get":
			c.get(req, res)
		case "put":
			if req.BodySize < 0 || req.BodySize > maxBody {
				return fmt.Errorf("put body of %d bytes", req.BodySize)
			}
			var body []byte
			if req.BodySize > 0 {
				if body, err = readBody(br, req.BodySize); err != nil {
					return err
				}
			}
			c.put(req, body, res)
		case "close":
			return send(res)
		default:
			res.Err = "unknown command " + strconv.Quote(req.Command)
		}
		if err := send(res); err != nil {
			return err
		}
	}
}

// readBody reads the base64 JSON string line that follows a put.
func readBody(br *bufio.Reader, size int64) ([]byte, error) {
	var line []byte
	for len(bytes.TrimSpace(line)) == 0 {
		var err error
		if line, err = br.ReadBytes('\n'); err != nil {
			return nil, fmt.Errorf("reading put body: %v", err)
		}
	}
	if len(line) < 3 || line[0] != '"' || line[len(line)-2] != '"' {
		return nil, errors.New("put body is not a JSON string")
	}
	enc := line[1 : len(line)-2]
	body := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(body, enc)
	if err != nil {
		return nil, fmt.Errorf("put body: %v", err)
	}
	if int64(n) != size {
		return nil, fmt.Errorf("put body has %d bytes, want %d", n, size)
	}
	return body[:n], nil
}

func (c *cache) get(req request, res *response) {
	if len(req.ActionID) != hashSize {
		res.Err = "bad action ID"
		return
	}
	for _, root := range []string{c.dir, c.seed} {
		if e, ok := lookup(root, c.seed, req.ActionID); ok {
			res.OutputID, res.Size, res.DiskPath = e.out, e.size, e.path
			t := e.time
			res.Time = &t
			return
		}
	}
	res.Miss = true
}

type entry struct {
	out  []byte
	size int64
	time time.Time
	path string // the body's file; in root unless the output was in the seed
}

// lookup reads root's index entry for id and checks that its body is there
// (or in the seed) with the recorded size. Anything malformed is a miss.
func lookup(root, seed string, id []byte) (entry, bool) {
	f, err := os.Open(name(root, id, "a"))
	if err != nil {
		return entry{}, false
	}
	b := make([]byte, entrySize+1)
	n, _ := io.ReadFull(f, b)
	f.Close()
	if n != entrySize {
		return entry{}, false
	}
	e, ok := parseEntry(b[:n], id)
	if !ok {
		return entry{}, false
	}
	// The body is in root; or, for an entry a put wrote for a body the
	// seed already had (put points at the seed's copy and writes only the
	// index entry), in the seed.
	for _, dir := range []string{root, seed} {
		p := name(dir, e.out, "d")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == e.size {
			e.path = p
			return e, true
		}
	}
	return entry{}, false
}

func parseEntry(b, id []byte) (entry, bool) {
	const h = 2 * hashSize
	if string(b[:3]) != "v1 " || b[3+h] != ' ' || b[4+2*h] != ' ' || b[5+2*h+20] != ' ' || b[len(b)-1] != '\n' {
		return entry{}, false
	}
	var aid, out [hashSize]byte
	if _, err := hex.Decode(aid[:], b[3:3+h]); err != nil || string(aid[:]) != string(id) {
		return entry{}, false
	}
	if _, err := hex.Decode(out[:], b[4+h:4+2*h]); err != nil {
		return entry{}, false
	}
	size, err1 := strconv.ParseInt(trimLeft(b[5+2*h:5+2*h+20]), 10, 64)
	nanos, err2 := strconv.ParseInt(trimLeft(b[6+2*h+20:6+2*h+40]), 10, 64)
	if err1 != nil || err2 != nil || size < 0 || nanos < 0 {
		return entry{}, false
	}
	return entry{out: out[:], size: size, time: time.Unix(0, nanos)}, true
}

func trimLeft(b []byte) string {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	return string(b[i:])
}

// put stores body under the output ID in the fresh cache (unless the seed
// already holds that exact body) and the index entry for the action ID.
func (c *cache) put(req request, body []byte, res *response) {
	if len(req.ActionID) != hashSize || len(req.OutputID) != hashSize {
		res.Err = "bad action or output ID"
		return
	}
	path := name(c.seed, req.OutputID, "d")
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(body)) {
		path = name(c.dir, req.OutputID, "d")
		if err := writeFile(path, body); err != nil {
			res.Err = err.Error()
			return
		}
	}
	line := fmt.Sprintf("v1 %x %x %20d %20d\n", req.ActionID, req.OutputID, len(body), c.now().UnixNano())
	if err := writeFile(name(c.dir, req.ActionID, "a"), []byte(line)); err != nil {
		res.Err = err.Error()
		return
	}
	res.DiskPath = path
}

// name is where the go command's disk cache keeps id's file of the kind
// ("a" for the index entry, "d" for the body).
func name(root string, id []byte, kind string) string {
	h := hex.EncodeToString(id)
	return filepath.Join(root, h[:2], h+"-"+kind)
}

// writeFile writes data to a new temporary file beside name, then renames it
// over name: whatever name was (a file, a link, a symlink), it is replaced.
func writeFile(name string, data []byte) error {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
