package sandbox

import (
	"errors"
	"testing"
)

func TestReadFileResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		stdout string
		want   error
		body   string
	}{
		{"file", 0, "3\nabc", nil, "abc"},
		{"empty", 0, "0\n", nil, ""},
		{"directory", ExitPathIsDirectory, "", ErrIsDirectory, ""},
		{"missing", ExitFileNotExist, "", ErrFileNotExist, ""},
		{"fifo", ExitNotRegularFile, "", ErrNotRegularFile, ""},
		{"too large", ExitFileTooLarge, "9\n", ErrFileTooLarge, ""},
		{"shrank", 0, "5\nabc", errAny, ""},
		{"grew", 0, "2\nabc", errAny, ""},
		{"no size", 0, "abc", errAny, ""},
		{"other exit", 1, "", errAny, ""},
	} {
		body, err := ReadFileResult("test", "/w/f", tc.code, []byte(tc.stdout), "boom", 8)
		switch {
		case tc.want == nil && (err != nil || string(body) != tc.body):
			t.Errorf("%s: ReadFileResult = %q, %v; want %q", tc.name, body, err, tc.body)
		case tc.want == errAny && err == nil, tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
			t.Errorf("%s: ReadFileResult = %q, %v; want %v", tc.name, body, err, tc.want)
		}
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")
