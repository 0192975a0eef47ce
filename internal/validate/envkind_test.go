package validate

import (
	"testing"

	"github.com/stockade/stockade/internal/testjson"
)

func TestEnvKind(t *testing.T) {
	for _, tc := range []struct {
		kind    testjson.Kind
		message string
		detail  string
		want    testjson.Kind
	}{
		{testjson.KindBuild, "fatal error: sqlite3.h: No such file or directory", "", KindMissingCHeader},
		{testjson.KindVet, "fatal error: gpgme/gpgme.h: No such file or directory", "", KindMissingCHeader},
		{testjson.KindPackage, "/usr/bin/ld: cannot find -lsqlite3: No such file or directory", "", KindMissingCLibrary},
		{testjson.KindBuild, "error: expected expression before ';' token", "", testjson.KindBuild},
		{testjson.KindTest, "open testdata/x.h: no such file or directory", "", testjson.KindTest},
		{testjson.KindPackage, "<time> Error building plugin: exit status 1", "open /var/tmp/cache.db: read-only file system", KindWritesReadOnly},
		{testjson.KindTest, "open /modcache/cache/x: read-only file system", "", KindWritesReadOnly},
		{testjson.KindBuild, "open x: read-only file system", "", testjson.KindBuild},
		{testjson.KindTest, "Get \"https://example.com\": dial tcp: lookup example.com on 127.0.0.11:53: no such host", "", KindNeedsNetwork},
		{testjson.KindTest, "dial tcp 93.184.216.34:443: connect: network is unreachable", "", KindNeedsNetwork},
		{testjson.KindTest, "dial tcp: lookup example.com on 10.255.255.53:53: dial udp 10.255.255.53:53: connect: network is unreachable", "", KindNeedsNetwork},
		{testjson.KindTest, "dial tcp: lookup example.com on [::1]:53: read udp [::1]:35123->[::1]:53: read: connection refused", "", KindNeedsNetwork},
		{testjson.KindTest, "dial tcp 127.0.0.1:8080: connect: connection refused", "", testjson.KindTest},
		{testjson.KindTest, "err: exec: \"getent\": executable file not found in $PATH", "", KindMissingProgram},
		{testjson.KindTest, "dial tcp 127.0.0.1:5432: connect: connection refused", "", KindNeedsHostService},
		{testjson.KindTest, "Unable to connect", "write udp 127.0.0.1:40211->127.0.0.1:514: write: connection refused", KindNeedsHostService},
		{testjson.KindTest, "dial tcp [::1]:6379: connect: connection refused", "", KindNeedsHostService},
		{testjson.KindPackage, "Cannot connect to the Docker daemon: dial unix /var/run/docker.sock: connect: no such file or directory", "", KindNeedsHostService},
		{testjson.KindTest, "dial unixgram /dev/log: connect: no such file or directory", "", KindNeedsHostService},
		{testjson.KindTest, "dial unix /tmp/.s.PGSQL.5432: connect: no such file or directory", "", KindNeedsHostService},
		// The test's own server, at a port it chose: an ordinary failure.
		{testjson.KindTest, "dial tcp 127.0.0.1:43127: connect: connection refused", "", testjson.KindTest},
		{testjson.KindTest, "dial unix /tmp/TestServe123/001/s.sock: connect: no such file or directory", "", testjson.KindTest},
		{testjson.KindTest, "dial unix /src/testdata/s.sock: connect: connection refused", "", testjson.KindTest},
		{testjson.KindBuild, "dial tcp 127.0.0.1:5432: connect: connection refused", "", testjson.KindBuild},
	} {
		in := testjson.Finding{Kind: tc.kind, Package: "m", Message: tc.message, Detail: tc.detail}
		in.Key = testjson.Key(in)
		got := envKind(in)
		if got.Kind != tc.want {
			t.Errorf("envKind(%s %q).Kind = %s; want %s", tc.kind, tc.message, got.Kind, tc.want)
		}
		if (got.Key == in.Key) != (tc.want == tc.kind) {
			t.Errorf("envKind(%q): key %s from %s; want it recomputed exactly when the kind changes", tc.message, got.Key, in.Key)
		}
	}
}
