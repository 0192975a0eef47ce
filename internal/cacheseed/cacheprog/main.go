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
// The seed never changes, so the program reads all of its index entries once
// at startup, from the file SEED/index that the seed build writes with
//
//	cacheprog -index SEED
//
// (the go command's own entry lines, each checked then to have its body, in
// one file), or, when a seed has no such file, by reading the entries
// themselves. Lookups in the seed are then map lookups; the fresh cache is
// still read on disk, and its entries win over the seed's.
//
// Requests are answered concurrently, at most maxInFlight at a time, and
// their responses written in whatever order they finish, as the protocol
// allows; a put's body is read from the stream before the next request, and
// "close" is answered after every request before it.
//
// Safety does not rest on this program: the seed is mounted read-only, so
// nothing in the container, this program included, can change it. This
// program only has to be correct: a get answers from the fresh cache, then
// from the seed; a put writes to the fresh cache only, through a temporary
// file and a rename, so a file planted in the fresh cache is replaced, never
// written through. Anything malformed in either cache is a miss.
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
	"slices"
	"strconv"
	"sync"
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

// Limits.
const (
	// maxBody bounds one put's body, in bytes; the go command's largest
	// outputs are linked test binaries, far below it.
	maxBody = 4 << 30
	// maxInFlight bounds the requests answered at once: the reader stops
	// reading requests while that many are unanswered, so a go command
	// cannot make the program start more goroutines than this.
	maxInFlight = 64
	// maxInlineBody is the largest put body, in bytes, handed to a
	// goroutine; a larger put is written by the reader itself before it
	// reads on, so at most maxInFlight such bodies are held in memory.
	maxInlineBody = 1 << 20
	// maxIndex bounds the seed's index file, in bytes (about 400,000
	// entries; the standard library's seed has under 2,000).
	maxIndex = 64 << 20
)

// indexFile is the seed's index, in the seed directory, and its first line.
const (
	indexFile   = "index"
	indexHeader = "stockade cacheprog index v1\n"
)

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "-index":
		if err := writeIndex(filepath.Clean(os.Args[2])); err != nil {
			fmt.Fprintln(os.Stderr, "cacheprog:", err)
			os.Exit(1)
		}
		return
	case len(os.Args) != 2:
		fmt.Fprintln(os.Stderr, "usage: cacheprog SEEDDIR (run by the go command as GOCACHEPROG; GOCACHE is the writable cache)\n       cacheprog -index SEEDDIR (writes SEEDDIR/index)")
		os.Exit(2)
	}
	dir := os.Getenv("GOCACHE")
	if !filepath.IsAbs(dir) {
		fmt.Fprintln(os.Stderr, "cacheprog: GOCACHE must be an absolute path")
		os.Exit(2)
	}
	c := newCache(filepath.Clean(os.Args[1]), filepath.Clean(dir))
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cacheprog:", err)
		os.Exit(1)
	}
}

// cache is the two-level cache: seed is read, dir is read and written.
type cache struct {
	seed, dir string
	now       func() time.Time
	// seedIndex holds the seed's entries; nil means the seed is looked up
	// on disk like the fresh cache (when it could not be read at startup).
	seedIndex *index
	// inFlight bounds the requests answered at once; 0 means maxInFlight,
	// 1 answers one at a time.
	inFlight int
}

// newCache returns the cache over seed and dir with the seed's index loaded.
func newCache(seed, dir string) *cache {
	c := &cache{seed: seed, dir: dir, now: time.Now}
	if idx, err := loadIndex(seed); err == nil {
		c.seedIndex = idx
	}
	return c
}

// out serialises the responses.
type out struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	enc *json.Encoder
	err error // the first write error; later sends do nothing
}

func (o *out) send(res *response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	if o.err = o.enc.Encode(res); o.err == nil {
		o.err = o.bw.Flush()
	}
}

func (o *out) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// serve answers requests from r on w until "close" or the end of r.
func (c *cache) serve(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	o := &out{bw: bufio.NewWriter(w)}
	o.enc = json.NewEncoder(o.bw)
	o.send(&response{KnownCommands: []string{"get", "put", "close"}})
	n := c.inFlight
	if n <= 0 {
		n = maxInFlight
	}
	slots := make(chan struct{}, n)
	// On an error serve returns without waiting for the requests in
	// flight: the program exits, and the go command fails anyway.
	var wg sync.WaitGroup
	// answer runs f and sends its response in a goroutine of its own,
	// once a slot is free.
	answer := func(f func() *response) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			o.send(f())
		}()
	}
	for {
		if err := o.failed(); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			wg.Wait()
			return o.failed()
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
		switch req.Command {
		case "get":
			answer(func() *response { return c.get(req) })
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
			if len(body) > maxInlineBody {
				o.send(c.put(req, body))
			} else {
				answer(func() *response { return c.put(req, body) })
			}
		case "close":
			// Every request before close is answered before it.
			wg.Wait()
			o.send(&response{ID: req.ID})
			return o.failed()
		default:
			o.send(&response{ID: req.ID, Err: "unknown command " + strconv.Quote(req.Command)})
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

func (c *cache) get(req request) *response {
	res := &response{ID: req.ID}
	if len(req.ActionID) != hashSize {
		res.Err = "bad action ID"
		return res
	}
	e, ok := c.lookup(c.dir, req.ActionID)
	if !ok {
		e, ok = c.lookupSeed(req.ActionID)
	}
	if !ok {
		res.Miss = true
		return res
	}
	res.OutputID, res.Size, res.DiskPath = e.out[:], e.size, e.path
	t := e.time
	res.Time = &t
	return res
}

type entry struct {
	out  [hashSize]byte
	size int64
	time time.Time
	path string // the body's file; in root unless the output was in the seed
}

// index is the seed's entries by action ID, and the sizes of the bodies they
// point at by output ID. It is never written after loadIndex.
type index struct {
	entries map[[hashSize]byte]entry
	bodies  map[[hashSize]byte]int64
}

// lookupSeed finds id in the seed.
func (c *cache) lookupSeed(id []byte) (entry, bool) {
	if c.seedIndex == nil {
		return c.lookup(c.seed, id)
	}
	e, ok := c.seedIndex.entries[[hashSize]byte(id)]
	return e, ok
}

// seedHas reports whether the seed holds the body out of size bytes, and
// where.
func (c *cache) seedHas(out []byte, size int64) (string, bool) {
	p := name(c.seed, out, "d")
	if c.seedIndex != nil {
		s, ok := c.seedIndex.bodies[[hashSize]byte(out)]
		return p, ok && s == size
	}
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// lookup reads root's index entry for id on disk and checks that its body is
// there (or in the seed) with the recorded size. Anything malformed is a
// miss.
func (c *cache) lookup(root string, id []byte) (entry, bool) {
	e, ok := readEntry(name(root, id, "a"), id)
	if !ok {
		return entry{}, false
	}
	// The body is in root; or, for an entry a put wrote for a body the
	// seed already had (put points at the seed's copy and writes only the
	// index entry), in the seed.
	p := name(root, e.out[:], "d")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == e.size {
		e.path = p
		return e, true
	}
	if p, ok := c.seedHas(e.out[:], e.size); ok {
		e.path = p
		return e, true
	}
	return entry{}, false
}

// readEntry reads the index entry file for id; anything malformed is a miss.
func readEntry(file string, id []byte) (entry, bool) {
	f, err := os.Open(file)
	if err != nil {
		return entry{}, false
	}
	b := make([]byte, entrySize+1)
	n, _ := io.ReadFull(f, b)
	f.Close()
	if n != entrySize {
		return entry{}, false
	}
	e, aid, ok := parseEntry(b[:n])
	if !ok || string(aid[:]) != string(id) {
		return entry{}, false
	}
	return e, true
}

// parseEntry parses one index entry line of entrySize bytes and returns it
// with its action ID.
func parseEntry(b []byte) (entry, [hashSize]byte, bool) {
	const h = 2 * hashSize
	var aid [hashSize]byte
	if len(b) != entrySize || string(b[:3]) != "v1 " || b[3+h] != ' ' || b[4+2*h] != ' ' || b[5+2*h+20] != ' ' || b[len(b)-1] != '\n' {
		return entry{}, aid, false
	}
	var e entry
	if _, err := hex.Decode(aid[:], b[3:3+h]); err != nil {
		return entry{}, aid, false
	}
	if _, err := hex.Decode(e.out[:], b[4+h:4+2*h]); err != nil {
		return entry{}, aid, false
	}
	size, err1 := strconv.ParseInt(trimLeft(b[5+2*h:5+2*h+20]), 10, 64)
	nanos, err2 := strconv.ParseInt(trimLeft(b[6+2*h+20:6+2*h+40]), 10, 64)
	if err1 != nil || err2 != nil || size < 0 || nanos < 0 {
		return entry{}, aid, false
	}
	e.size, e.time = size, time.Unix(0, nanos)
	return e, aid, true
}

func trimLeft(b []byte) string {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	return string(b[i:])
}

// loadIndex reads the seed's index file, or, if the seed has none, its
// entries. A malformed line or entry is left out (a miss).
func loadIndex(seed string) (*index, error) {
	b, err := readIndexFile(filepath.Join(seed, indexFile))
	if errors.Is(err, os.ErrNotExist) {
		lines, err := scanSeed(seed)
		if err != nil {
			return nil, err
		}
		b = append([]byte(indexHeader), lines...)
	} else if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(b, []byte(indexHeader))
	if !ok {
		return nil, errors.New("seed index: bad header")
	}
	idx := &index{entries: map[[hashSize]byte]entry{}, bodies: map[[hashSize]byte]int64{}}
	for len(rest) >= entrySize {
		e, aid, ok := parseEntry(rest[:entrySize])
		rest = rest[entrySize:]
		if !ok {
			continue
		}
		e.path = name(seed, e.out[:], "d")
		idx.entries[aid] = e
		idx.bodies[e.out] = e.size
	}
	return idx, nil
}

func readIndexFile(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndex+1))
	if err == nil && len(b) > maxIndex {
		err = fmt.Errorf("seed index is over %d bytes", maxIndex)
	}
	return b, err
}

// scanSeed returns the index entry lines of the cache in seed whose bodies
// are there, regular files of the recorded size, sorted by action ID.
func scanSeed(seed string) ([]byte, error) {
	subdirs, err := os.ReadDir(seed)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	for _, sd := range subdirs {
		if !sd.IsDir() || !isHex(sd.Name(), 2) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(seed, sd.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			n := f.Name()
			if !f.Type().IsRegular() || len(n) != 2*hashSize+2 || n[2*hashSize:] != "-a" || !isHex(n[:2*hashSize], 2*hashSize) {
				continue
			}
			id, _ := hex.DecodeString(n[:2*hashSize])
			e, ok := readEntry(filepath.Join(seed, sd.Name(), n), id)
			if !ok {
				continue
			}
			fi, err := os.Lstat(name(seed, e.out[:], "d"))
			if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.size {
				continue
			}
			lines = append(lines, fmt.Appendf(nil, "v1 %x %x %20d %20d\n", id, e.out, e.size, e.time.UnixNano()))
		}
	}
	slices.SortFunc(lines, bytes.Compare)
	return bytes.Join(lines, nil), nil
}

// writeIndex writes seed's index file (run by the seed build, before the
// seed is made read-only).
func writeIndex(seed string) error {
	lines, err := scanSeed(seed)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(seed, indexFile), append([]byte(indexHeader), lines...))
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// put stores body under the output ID in the fresh cache (unless the seed
// already holds that exact body) and the index entry for the action ID.
func (c *cache) put(req request, body []byte) *response {
	res := &response{ID: req.ID}
	if len(req.ActionID) != hashSize || len(req.OutputID) != hashSize {
		res.Err = "bad action or output ID"
		return res
	}
	path, ok := c.seedHas(req.OutputID, int64(len(body)))
	if !ok {
		path = name(c.dir, req.OutputID, "d")
		if err := writeFile(path, body); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	line := fmt.Sprintf("v1 %x %x %20d %20d\n", req.ActionID, req.OutputID, len(body), c.now().UnixNano())
	if err := writeFile(name(c.dir, req.ActionID, "a"), []byte(line)); err != nil {
		res.Err = err.Error()
		return res
	}
	res.DiskPath = path
	return res
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
