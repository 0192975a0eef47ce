package dockerapi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// readers wrap a stream so it arrives in the ways a socket may deliver it.
var readers = map[string]func([]byte) io.Reader{
	"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
	"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	"halves":   func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
	"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
}

func TestDemux(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 5000) // 80000 bytes: more than one copy buffer
	tests := []struct {
		name       string
		in         []byte
		out, err   string
		wantErr    error // matched with errors.Is; nil means success
		wantStream string
	}{
		{name: "empty"},
		{name: "stdout", in: frame(1, "hello\n"), out: "hello\n"},
		{name: "stderr", in: frame(2, "oops\n"), err: "oops\n"},
		{name: "interleaved", in: frames(frame(1, "a"), frame(2, "b"), frame(1, "c"), frame(2, "d")), out: "ac", err: "bd"},
		{name: "empty frames", in: frames(frame(1, ""), frame(2, ""), frame(1, "x")), out: "x"},
		{name: "stdin goes to stdout", in: frames(frame(0, "in"), frame(1, "out")), out: "inout"},
		{name: "big frame", in: frames(frame(1, big), frame(2, big)), out: big, err: big},
		{name: "binary payload", in: frame(1, "\x00\x01\x02\xff\x00\x00\x00\x08"), out: "\x00\x01\x02\xff\x00\x00\x00\x08"},
		{name: "system frame is the engine's error", in: frames(frame(1, "a"), frame(3, "error grabbing logs"), frame(1, "b")), out: "a",
			wantStream: "error grabbing logs"},
		{name: "unknown stream", in: frames(frame(1, "a"), frame(4, "x")), out: "a", wantErr: dockerapi.ErrCorruptStream},
		{name: "text instead of frames", in: []byte("Error grabbing logs: boom\n"), wantErr: dockerapi.ErrCorruptStream},
		{name: "huge frame size", in: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, wantErr: dockerapi.ErrCorruptStream},
		{name: "cut in header", in: frames(frame(1, "a"), []byte{1, 0, 0}), out: "a", wantErr: dockerapi.ErrCorruptStream},
		{name: "cut in payload", in: frames(frame(2, "a"), frame(1, "hello")[:10]), out: "he", err: "a", wantErr: dockerapi.ErrCorruptStream},
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				var out, errb bytes.Buffer
				err := dockerapi.Demux(wrap(tt.in), &out, &errb)
				switch {
				case tt.wantStream != "":
					var se *dockerapi.StreamError
					if !errors.As(err, &se) || se.Message != tt.wantStream {
						t.Errorf("Demux = %v; want StreamError %q", err, tt.wantStream)
					}
				case tt.wantErr != nil:
					if !errors.Is(err, tt.wantErr) {
						t.Errorf("Demux = %v; want %v", err, tt.wantErr)
					}
				case err != nil:
					t.Errorf("Demux = %v", err)
				}
				if out.String() != tt.out || errb.String() != tt.err {
					t.Errorf("Demux wrote stdout %.40q, stderr %.40q; want %.40q, %.40q", out.String(), errb.String(), tt.out, tt.err)
				}
			})
		}
	}
}

func TestDemuxNilWriters(t *testing.T) {
	in := frames(frame(1, "a"), frame(2, "b"))
	if err := dockerapi.Demux(bytes.NewReader(in), nil, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := dockerapi.Demux(bytes.NewReader(in), &out, nil); err != nil || out.String() != "a" {
		t.Fatalf("Demux = %v, stdout %q", err, out.String())
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestDemuxWriterError(t *testing.T) {
	boom := errors.New("boom")
	err := dockerapi.Demux(bytes.NewReader(frame(2, "x")), nil, failWriter{boom})
	if !errors.Is(err, boom) {
		t.Fatalf("Demux = %v; want the writer's error", err)
	}
}

func TestDemuxReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(frame(1, "ok")), iotest.ErrReader(boom))
	var out bytes.Buffer
	if err := dockerapi.Demux(r, &out, nil); !errors.Is(err, boom) || out.String() != "ok" {
		t.Fatalf("Demux = %v, stdout %q; want the read error after ok", err, out.String())
	}
}

// chunkReader returns its data in pieces whose sizes come from rnd.
type chunkReader struct {
	b   []byte
	rnd *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(1+r.rnd.IntN(20), len(p), len(r.b))
	if r.rnd.IntN(8) == 0 {
		n = min(len(p), len(r.b)) // now and then a long read
	}
	n = copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// TestDemuxRandomSplits feeds random frame sequences split at random points
// and checks each stream comes out whole and in order.
func TestDemuxRandomSplits(t *testing.T) {
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 2))
		var in []byte
		var wantOut, wantErr bytes.Buffer
		for range rnd.IntN(30) {
			p := make([]byte, rnd.IntN(100))
			for i := range p {
				p[i] = byte(rnd.UintN(256))
			}
			switch s := byte(rnd.IntN(3)); s {
			case 0, 1:
				wantOut.Write(p)
				in = append(in, frame(s, string(p))...)
			case 2:
				wantErr.Write(p)
				in = append(in, frame(s, string(p))...)
			}
		}
		var out, errb bytes.Buffer
		if err := dockerapi.Demux(&chunkReader{in, rnd}, &out, &errb); err != nil {
			t.Fatalf("seed %d: Demux = %v", seed, err)
		}
		if !bytes.Equal(out.Bytes(), wantOut.Bytes()) || !bytes.Equal(errb.Bytes(), wantErr.Bytes()) {
			t.Fatalf("seed %d: streams differ: stdout %d/%d bytes, stderr %d/%d", seed, out.Len(), wantOut.Len(), errb.Len(), wantErr.Len())
		}
	}
}

func TestBuffer(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		writes    []string
		want      string
		total     int64
		truncated bool
	}{
		{"zero value keeps nothing", 0, []string{"abc"}, "", 3, true},
		{"negative keeps nothing", -5, []string{"abc"}, "", 3, true},
		{"nothing written", 4, nil, "", 0, false},
		{"empty write", 0, []string{""}, "", 0, false},
		{"under", 10, []string{"abc"}, "abc", 3, false},
		{"exactly max", 5, []string{"ab", "cde"}, "abcde", 5, false},
		{"one over", 5, []string{"abcdef"}, "abcde", 6, true},
		{"over across writes", 5, []string{"abc", "def", "ghi"}, "abcde", 9, true},
		{"full then more", 3, []string{"abc", "d"}, "abc", 4, true},
		{"full then empty", 3, []string{"abc", ""}, "abc", 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &dockerapi.Buffer{Max: tt.max}
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want all written", w, n, err)
				}
			}
			if b.String() != tt.want || string(b.Bytes()) != tt.want || b.Total() != tt.total || b.Truncated() != tt.truncated {
				t.Errorf("Buffer = %q, total %d, truncated %v; want %q, %d, %v", b.String(), b.Total(), b.Truncated(), tt.want, tt.total, tt.truncated)
			}
		})
	}
}

// TestBufferThroughDemux caps one stream read a byte at a time: exactly Max
// bytes are kept and every byte is counted.
func TestBufferThroughDemux(t *testing.T) {
	const max = 1000
	var in, want []byte
	for i := range 50 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 97)
		in = append(in, frame(1, string(p))...)
		in = append(in, frame(2, "e")...)
		want = append(want, p...)
	}
	out, errb := dockerapi.NewBuffer(max), dockerapi.NewBuffer(max)
	if err := dockerapi.Demux(iotest.OneByteReader(bytes.NewReader(in)), out, errb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want[:max]) || out.Total() != int64(len(want)) || !out.Truncated() {
		t.Errorf("stdout kept %d bytes (prefix ok %v), total %d, truncated %v; want %d, total %d, truncated",
			len(out.Bytes()), bytes.HasPrefix(want, out.Bytes()), out.Total(), out.Truncated(), max, len(want))
	}
	if errb.String() != strings.Repeat("e", 50) || errb.Truncated() {
		t.Errorf("stderr = %q, truncated %v", errb.String(), errb.Truncated())
	}
}

func TestBufferConcurrent(t *testing.T) {
	b := dockerapi.NewBuffer(100)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("0123456789"))
				b.Truncated()
			}
		})
	}
	wg.Wait()
	if len(b.Bytes()) != 100 || b.Total() != 8000 || !b.Truncated() {
		t.Errorf("kept %d, total %d, truncated %v; want 100, 8000, true", len(b.Bytes()), b.Total(), b.Truncated())
	}
}

func TestCapReader(t *testing.T) {
	tests := []struct {
		name    string
		n       int64
		in      string
		want    string
		wantErr error
	}{
		{"under", 10, "abc", "abc", nil},
		{"exactly", 3, "abc", "abc", nil},
		{"over", 2, "abc", "ab", dockerapi.ErrCapExceeded},
		{"zero cap empty", 0, "", "", nil},
		{"zero cap data", 0, "a", "", dockerapi.ErrCapExceeded},
		{"negative cap", -1, "a", "", dockerapi.ErrCapExceeded},
		{"large", 1 << 20, strings.Repeat("x", 1<<16), strings.Repeat("x", 1<<16), nil},
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := io.ReadAll(&dockerapi.CapReader{R: wrap([]byte(tt.in)), N: tt.n})
				if string(got) != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Errorf("ReadAll(CapReader{%d}) = %q, %v; want %q, %v", tt.n, got, err, tt.want, tt.wantErr)
				}
			})
		}
	}
}

// TestFrameHelper pins the test's own encoder to the documented layout.
func TestFrameHelper(t *testing.T) {
	f := frame(2, "abc")
	if f[0] != 2 || f[1]|f[2]|f[3] != 0 || binary.BigEndian.Uint32(f[4:8]) != 3 || string(f[8:]) != "abc" {
		t.Fatalf("frame = %x", f)
	}
}
