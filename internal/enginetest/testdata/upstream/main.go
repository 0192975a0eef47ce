// Command upstream is the gate tests' upstream server, run in a container
// on the test network: plain HTTP on :8080 and HTTPS (a certificate it
// makes at start, for every name) on :8443, both answering
// "upstream host=<Host> path=<path>" or, for /bytes?n=N, N bytes; and UDP
// on :9999, counting datagrams, whose count GET /udp answers; an OTLP/HTTP
// receiver under /otlp (otlptest: exports POSTed to /otlp/v1/traces and
// /otlp/v1/metrics, what it decoded at GET /otlp/dump). When the
// directory /files exists (a GOPROXY file layout the tests mount), GET
// /files/<path> serves it (404 for what it lacks), and GET
// /redirect/<host>/<path> answers 302 to http://<host>:8080/files/<path>:
// a module proxy that sends its clients to another host; and GET
// /private/<path> serves the same files to a client that authenticates
// as PrivateUser:PrivatePassword (HTTP Basic; 401 otherwise): a private
// module proxy. GET /cert answers its TLS certificate (PEM), for a client
// to trust. It is test
// code, built by the tests with the host's go command. Its TLS accepts what
// busybox's ssl_client (the tests' TLS client) offers: RSA key exchange and
// SHA-1 handshake signatures, which Go no longer allows by default.

//go:debug tlsrsakex=1
//go:debug tlssha1=1
package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stockade/stockade/internal/gate/otlptest"
)

// filesDir is where the tests mount a directory to serve.
const filesDir = "/files"

// The credentials /private/ wants (enginetest.PrivateUser, PrivatePassword).
const (
	privateUser     = "stockade"
	privatePassword = "s3cret-0f-the-private-proxy"
)

func main() {
	var udp atomic.Int64
	pc, err := net.ListenPacket("udp", ":9999")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err == nil {
				udp.Add(1)
			}
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/udp", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, udp.Load()) })
	mux.Handle("/otlp/", http.StripPrefix("/otlp", &otlptest.Receiver{}))
	zeros := make([]byte, 1<<20)
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(zeros)))
			if _, err := w.Write(zeros[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	if fi, err := os.Stat(filesDir); err == nil && fi.IsDir() {
		mux.Handle("/files/", http.StripPrefix("/files/", http.FileServer(http.Dir(filesDir))))
		private := http.StripPrefix("/private/", http.FileServer(http.Dir(filesDir)))
		mux.HandleFunc("/private/", func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != privateUser || p != privatePassword {
				w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			private.ServeHTTP(w, r)
		})
		mux.HandleFunc("/redirect/", func(w http.ResponseWriter, r *http.Request) {
			host, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/redirect/"), "/")
			if !ok || host == "" {
				http.NotFound(w, r)
				return
			}
			http.Redirect(w, r, "http://"+host+":8080/files/"+rest, http.StatusFound)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "upstream host=%s path=%s tls=%v auth=%s\n", r.Host, r.URL.Path, r.TLS != nil, r.Header.Get("Authorization"))
	})
	// RSA: busybox's ssl_client, the tests' TLS client, has no ECDSA.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream"},
		DNSNames: []string{"allowed.test", "sub.allowed.test", "denied.test", "collector.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	mux.HandleFunc("/cert", func(w http.ResponseWriter, r *http.Request) {
		pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	tl, err := tls.Listen("tcp", ":8443", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.Serve(tl, mux)) }()
	log.Fatal(http.ListenAndServe(":8080", mux))
}
