package validate

import (
	"testing"

	"github.com/stockade/stockade/internal/testjson"
)

func TestCgoKind(t *testing.T) {
	for _, tc := range []struct {
		kind    testjson.Kind
		message string
		want    testjson.Kind
	}{
		{testjson.KindBuild, "fatal error: sqlite3.h: No such file or directory", KindMissingCHeader},
		{testjson.KindVet, "fatal error: gpgme/gpgme.h: No such file or directory", KindMissingCHeader},
		{testjson.KindPackage, "/usr/bin/ld: cannot find -lsqlite3: No such file or directory", KindMissingCLibrary},
		{testjson.KindBuild, "error: expected expression before ';' token", testjson.KindBuild},
		{testjson.KindTest, "open testdata/x.h: no such file or directory", testjson.KindTest},
	} {
		in := testjson.Finding{Kind: tc.kind, Package: "m", Message: tc.message}
		in.Key = testjson.Key(in)
		got := cgoKind(in)
		if got.Kind != tc.want {
			t.Errorf("cgoKind(%s %q).Kind = %s; want %s", tc.kind, tc.message, got.Kind, tc.want)
		}
		if (got.Key == in.Key) != (tc.want == tc.kind) {
			t.Errorf("cgoKind(%q): key %s from %s; want it recomputed exactly when the kind changes", tc.message, got.Key, in.Key)
		}
	}
}
