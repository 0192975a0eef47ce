// Package gate is the egress gate's logic: an HTTP forward proxy (plain
// HTTP and CONNECT) that admits a request only when its host matches the
// session's allowed hosts and every address it dials passes the address
// rules, and keeps a bounded record of every attempt. cmd/stockade-gate is
// its thin main; sandbox/docker and the toolchain's networked profiles run
// it as one container per session, sandbox/kubernetes as a container of the
// session's pod.
//
// The client (the sandbox) is hostile and reaches nothing but the gate.
// Names are matched in one canonical spelling (CanonicalHost); the gate
// resolves names itself and dials the address it checked; loopback,
// link-local, unspecified, multicast, broadcast, the engine host's and the
// gate's own addresses (Policy.HostAddrs) are refused, and private ones
// unless Policy.Private admits the range. A refusal is a 403 with the reason
// in the body and in the X-Stockade-Gate-Reason header. CONNECT is an opaque
// tunnel; the gate does not terminate TLS. It serves only its session's side
// (Settings.ListenOn, Settings.Clients), and every string of a Record is cut
// to MaxFieldBytes.
//
// Configuration comes from the environment (Env names the variables); the
// host talks to the gate over an abstract Unix socket (ControlSocket) through
// `stockade-gate ready` and `stockade-gate log`. With a control plane URL the
// gate fetches the session's credentials once at start and substitutes their
// placeholders in plain-HTTP requests to the hosts they admit. With an OTLP
// endpoint it exports a span per request and two counters
// (internal/gate/telemetry). docs/design/gate.md has the threat model, the
// protocol, the control plane and every telemetry attribute.
package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Port is where the gate takes proxy requests (on the address
// Settings.ListenOn chooses), for the proxy URL the backend hands the
// sandbox.
const Port = 3128

// copyBufferBytes is the read buffer of a plain-HTTP upstream
// connection, in bytes: the answer's head is parsed from it, and what of
// the body it holds is relayed before the rest goes straight through.
const copyBufferBytes = 64 << 10

// Budgets of one request.
const (
	// DialTimeout bounds resolving and connecting to the upstream.
	DialTimeout = 10 * time.Second
	// ResponseHeaderTimeout bounds the wait for a plain-HTTP upstream's
	// response headers.
	ResponseHeaderTimeout = 60 * time.Second
	// ReadHeaderTimeout bounds reading a client's request headers.
	ReadHeaderTimeout = 30 * time.Second
)

// Resolver looks names up; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Server.
type Config struct {
	Policy Policy
	// Log receives a Record per request; nil keeps a NewLog(0).
	Log *Log
	// Resolver resolves names; nil means net.DefaultResolver (which reads
	// /etc/hosts, then DNS).
	Resolver Resolver
	// Credentials are substituted into plain-HTTP requests (see the
	// package documentation); nil substitutes nothing.
	Credentials []Credential
	// OnRecord, when set, is called with every record after it is logged
	// (telemetry).
	OnRecord func(Record)
	// Logger receives the gate's own troubles; nil discards.
	Logger *slog.Logger
	// Dial connects to a vetted address ("ip:port"); nil means a
	// net.Dialer with DialTimeout. Tests point it elsewhere.
	Dial DialFunc
	// Clients are the ranges Serve takes connections from (Settings.
	// Clients), besides loopback; empty means loopback only.
	Clients []netip.Prefix
}

// Server is the proxy; it implements http.Handler.
type Server struct {
	cfg      Config
	log      *Log
	resolver Resolver
	logger   *slog.Logger
	// outsiders counts the connections Serve closed unserved.
	outsiders atomic.Int64
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Log, resolver: cfg.Resolver, logger: cfg.Logger}
	if s.log == nil {
		s.log = NewLog(0)
	}
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.cfg.Dial == nil {
		d := &net.Dialer{Timeout: DialTimeout}
		s.cfg.Dial = d.DialContext
	}
	return s
}

// Log returns the server's record.
func (s *Server) Log() *Log { return s.log }

// vetted is a destination whose addresses passed the policy.
type vetted struct {
	addrs []netip.Addr
	port  uint16
	used  netip.Addr // the one that answered
}

func (v *vetted) dial(ctx context.Context, dial DialFunc) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	var errs []error
	for _, a := range v.addrs {
		c, err := dial(ctx, "tcp", netip.AddrPortFrom(a, v.port).String())
		if err == nil {
			v.used = a
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// resolve checks host against the policy, resolves it and keeps the
// addresses that pass; refused is true when the policy (not DNS or the
// network) said no.
func (s *Server) resolve(ctx context.Context, host string, port uint16) (v *vetted, refused bool, err error) {
	if err := s.cfg.Policy.AllowHost(host); err != nil {
		return nil, true, err
	}
	return lookupVetted(ctx, s.cfg.Policy, s.resolver, host, port)
}

// lookupVetted resolves host (an IP literal stands for itself) and keeps
// the addresses p.AllowAddr admits; refused is true when the address rules
// (not DNS) left none. The host rules are the caller's.
func lookupVetted(ctx context.Context, p Policy, r Resolver, host string, port uint16) (v *vetted, refused bool, err error) {
	h, err := CanonicalHost(host)
	if err != nil {
		return nil, true, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(h); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		if addrs, err = r.LookupNetIP(ctx, "ip4", h); err != nil {
			return nil, false, fmt.Errorf("resolve %s: %w", h, err)
		}
	}
	v = &vetted{port: port}
	var first error
	for _, a := range addrs {
		if err := p.AllowAddr(a); err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", h, err)
			}
			continue
		}
		v.addrs = append(v.addrs, a.Unmap())
	}
	if len(v.addrs) == 0 {
		if first == nil {
			first = fmt.Errorf("%w: %s resolves to no address", ErrAddress, h)
		}
		return nil, true, first
	}
	return v, false, nil
}

// DialFunc connects to an address, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// AddrDialer returns the dial function of the gate's own connections (to
// its OTLP collector): it resolves the host of addr ("host:port") with r
// (nil: net.DefaultResolver), keeps the addresses p.AllowAddr admits and
// dials them in turn with dial (nil: a net.Dialer with DialTimeout), the
// way the proxy dials for the sandbox. Only the address rules apply: the
// host is the gate's configuration, not the sandbox's request, so
// p.Allowed and p.AnyHost are not asked. A refusal matches ErrAddress or
// ErrBadHost.
func AddrDialer(p Policy, r Resolver, dial DialFunc) DialFunc {
	if r == nil {
		r = net.DefaultResolver
	}
	if dial == nil {
		d := &net.Dialer{Timeout: DialTimeout}
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := splitHostPort(addr, "")
		if err != nil {
			return nil, fmt.Errorf("gate: dial %s: %w", addr, err)
		}
		v, _, err := lookupVetted(ctx, p, r, host, port)
		if err != nil {
			return nil, fmt.Errorf("gate: dial %s: %w", addr, err)
		}
		return v.dial(ctx, dial)
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A client may end its sending side once its request is sent (HTTP/1.x
	// allows it; busybox nc does at the end of its input), and the HTTP
	// server then cancels r.Context(): that must not cancel the request.
	// Each step has its own bound instead (DialTimeout,
	// ResponseHeaderTimeout), and a client that is gone fails the writes.
	ctx := context.WithoutCancel(r.Context())
	rec := Record{Time: time.Now().UTC(), Method: r.Method}
	// A hijacked client connection closes only once the record is in the
	// log: a client that reads until the connection closes finds it there.
	var client net.Conn
	defer func() {
		rec.Duration = time.Since(rec.Time)
		rec = s.log.Add(rec)
		if s.cfg.OnRecord != nil {
			s.cfg.OnRecord(rec)
		}
		if client != nil {
			client.Close()
		}
	}()
	if r.Method == http.MethodConnect {
		client = s.connect(ctx, w, r, &rec)
		return
	}
	client = s.forward(ctx, w, r, &rec)
}

// refuse answers a refusal or failure at once, with the reason.
func refuse(w http.ResponseWriter, rec *Record, status int, verdict string, reason error) {
	rec.Status, rec.Verdict, rec.Reason = status, verdict, reason.Error()
	msg := "stockade gate: " + verdict + ": " + reason.Error()
	w.Header().Set("X-Stockade-Gate-Reason", strings.Map(printable, reason.Error()))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// printable keeps a header value to printable ASCII.
func printable(r rune) rune {
	if r < 0x20 || r > 0x7e {
		return '?'
	}
	return r
}

// splitHostPort splits a request's authority, with def as the port when
// it names none.
func splitHostPort(authority, def string) (host string, port uint16, err error) {
	host, p, err := net.SplitHostPort(authority)
	if err != nil {
		host, p = authority, def
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	n, perr := strconv.ParseUint(p, 10, 16)
	if perr != nil || n == 0 || host == "" {
		return "", 0, fmt.Errorf("%w: authority %q", ErrBadHost, authority)
	}
	return host, uint16(n), nil
}

// admit judges the request's authority (defPort when it names none): it
// fills in rec's host and port and returns the vetted destination, or
// answers the refusal (400, 403 or 502) and returns nil.
func (s *Server) admit(ctx context.Context, w http.ResponseWriter, rec *Record, authority, defPort string) (*vetted, uint16) {
	host, port, err := splitHostPort(authority, defPort)
	rec.Host, rec.Port = host, strconv.Itoa(int(port))
	if err != nil {
		rec.Host = authority
		refuse(w, rec, http.StatusBadRequest, Invalid, err)
		return nil, 0
	}
	v, refused, err := s.resolve(ctx, host, port)
	switch {
	case err != nil && refused:
		refuse(w, rec, http.StatusForbidden, Refused, err)
		return nil, 0
	case err != nil:
		refuse(w, rec, http.StatusBadGateway, Failed, err)
		return nil, 0
	}
	return v, port
}

// connect opens a tunnel to an admitted host and port. It returns the
// hijacked client connection, for the caller to close, or nil.
func (s *Server) connect(ctx context.Context, w http.ResponseWriter, r *http.Request, rec *Record) (hijacked net.Conn) {
	v, port := s.admit(ctx, w, rec, r.Host, "")
	if v == nil {
		return nil
	}
	up, err := v.dial(ctx, s.cfg.Dial)
	if err != nil {
		refuse(w, rec, http.StatusBadGateway, Failed, err)
		return nil
	}
	defer up.Close()
	rec.Addr = netip.AddrPortFrom(v.used, port).String()
	client, brw := hijack(w, rec)
	if client == nil {
		return nil
	}
	rec.Status, rec.Verdict = http.StatusOK, Allowed
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return client
	}
	var up2, dn atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// What the client sent after its request is already buffered.
		n, _ := relay(up, nil, brw.Reader, client, -1)
		up2.Store(n)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		n, _ := io.Copy(client, up)
		dn.Store(n)
		closeWrite(client)
	}()
	wg.Wait()
	rec.BytesUp, rec.BytesDn = up2.Load(), dn.Load()
	return client
}

// hijack takes the client's connection over from the HTTP server, or
// records why it cannot and returns nil.
func hijack(w http.ResponseWriter, rec *Record) (net.Conn, *bufio.ReadWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		refuse(w, rec, http.StatusInternalServerError, Failed, errors.New("connection cannot be hijacked"))
		return nil, nil
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		rec.Verdict, rec.Reason = Failed, err.Error()
		return nil, nil
	}
	return c, brw
}

// relay copies to dst what buffered holds (at most limit bytes of it when
// limit >= 0), through head when it is not nil (flushed after it: the
// answer's head and the first bytes leave together), then everything from
// src until it ends: that copy is between two connections (or a limited
// reader of one), which the kernel splices without bringing the bytes up
// to the gate.
func relay(dst io.Writer, head *bufio.Writer, buffered *bufio.Reader, src io.Reader, limit int64) (int64, error) {
	b := int64(buffered.Buffered())
	if limit >= 0 {
		b = min(b, limit)
	}
	var w io.Writer = dst
	if head != nil {
		w = head
	}
	n, err := io.CopyN(w, buffered, b)
	if err == nil && head != nil {
		err = head.Flush()
	}
	if err != nil {
		return n, err
	}
	m, err := io.Copy(dst, src)
	return n + m, err
}

// closeWrite half-closes c so the other side sees the end of the stream.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// hopHeaders are the hop-by-hop headers a proxy must not pass on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// forward passes a plain-HTTP request in absolute form to an admitted
// upstream and copies the answer back. It returns the hijacked client
// connection, for the caller to close, or nil.
func (s *Server) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, rec *Record) (hijacked net.Conn) {
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		rec.Host = r.Host
		refuse(w, rec, http.StatusBadRequest, Invalid, fmt.Errorf("not a proxy request: want an absolute http:// URL or CONNECT, got %q", r.URL.String()))
		return nil
	}
	v, port := s.admit(ctx, w, rec, r.URL.Host, "80")
	if v == nil {
		return nil
	}
	host := rec.Host
	up, err := v.dial(ctx, s.cfg.Dial)
	if err != nil {
		refuse(w, rec, http.StatusBadGateway, Failed, err)
		return nil
	}
	defer up.Close()
	rec.Addr = netip.AddrPortFrom(v.used, port).String()
	// One request per upstream connection, closed after the answer: the
	// answer's body is then everything the upstream sends after its head,
	// relayed as it comes (splice where the kernel can), chunked or not.
	out := r.Clone(ctx)
	out.RequestURI, out.Host, out.Close = "", r.URL.Host, true
	stripHop(out.Header)
	s.substitute(host, out.Header)
	body := &countReader{r: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = body
	}
	up.SetDeadline(time.Now().Add(ResponseHeaderTimeout))
	err = out.Write(up)
	rec.BytesUp = body.n
	if err != nil {
		refuse(w, rec, http.StatusBadGateway, Failed, fmt.Errorf("send the request: %w", err))
		return nil
	}
	br := bufio.NewReaderSize(up, copyBufferBytes)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		refuse(w, rec, http.StatusBadGateway, Failed, fmt.Errorf("read the answer: %w", err))
		return nil
	}
	up.SetDeadline(time.Time{})
	client, cw := hijack(w, rec)
	if client == nil {
		return nil
	}
	rec.Status, rec.Verdict = resp.StatusCode, Allowed
	stripHop(resp.Header)
	fmt.Fprintf(cw, "HTTP/1.1 %s\r\n", resp.Status)
	if len(resp.TransferEncoding) > 0 {
		fmt.Fprintf(cw, "Transfer-Encoding: %s\r\n", strings.Join(resp.TransferEncoding, ", "))
	}
	resp.Header.Write(cw)
	cw.WriteString("Connection: close\r\n\r\n")
	// The head goes out with the body bytes already read, in one write
	// for a small answer.
	var n int64
	if resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0 {
		// Exactly the declared body: the record ends with the client's
		// answer, and nothing the upstream adds passes.
		n, err = relay(client, cw.Writer, br, io.LimitReader(up, max(0, resp.ContentLength-int64(br.Buffered()))), resp.ContentLength)
	} else {
		n, err = relay(client, cw.Writer, br, up, -1)
	}
	rec.BytesDn = n
	if err != nil {
		rec.Reason = "answer cut short: " + err.Error()
	}
	return client
}

// countReader counts what passes through it.
type countReader struct {
	r io.ReadCloser
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countReader) Close() error { return c.r.Close() }

// Serve serves proxy requests on l until ctx ends, to clients on loopback
// or in Config.Clients only: a connection from anywhere else is closed
// unread, and nothing of it is recorded (it is no request of the
// session's).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: ReadHeaderTimeout, ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	err := hs.Serve(clientListener{l, s})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// clientListener passes on the connections of Serve's clients only.
type clientListener struct {
	net.Listener
	s *Server
}

func (l clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.isClient(c.RemoteAddr()) {
			return c, nil
		}
		c.Close()
		// Logged at the 1st, 2nd, 4th, 8th... such connection: a flood
		// from outside cannot flood the gate's log.
		if n := l.s.outsiders.Add(1); n&(n-1) == 0 {
			l.s.logger.Warn("closed connections from outside the session's side", "remote", c.RemoteAddr().String(), "count", n)
		}
	}
}

// isClient reports whether a connection from addr is the session's:
// from loopback or from a range of Config.Clients.
func (s *Server) isClient(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	a := ta.AddrPort().Addr().Unmap()
	return a.IsLoopback() || contains(s.cfg.Clients, a)
}
