package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestCheckWriteSize(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want error
	}{
		{0, nil},
		{1, nil},
		{MaxFileBytes, nil},
		{MaxFileBytes + 1, ErrFileTooLarge},
		{-1, ErrSizeNotALength},
		{-1 << 62, ErrSizeNotALength},
	} {
		if got := CheckWriteSize(tt.size); !errors.Is(got, tt.want) || (tt.want == nil) != (got == nil) {
			t.Errorf("CheckWriteSize(%d) = %v; want %v", tt.size, got, tt.want)
		}
	}
}

func TestEnvNames(t *testing.T) {
	for _, tt := range []struct {
		name            string
		valid, reserved bool
	}{
		{"PATH", true, false},
		{"_x1", true, false},
		{"a", true, false},
		{"", false, false},
		{"1A", false, false},
		{"A=B", false, false},
		{"A\x00B", false, false},
		{"A-B", false, false},
		{"A B", false, false},
		{"é", false, false},
		{strings.Repeat("A", 257), false, false},
		{"STOCKADE_EXEC", true, true},
		{"stockade_x", true, true},
		{"HTTP_PROXY", true, true},
		{"https_proxy", true, true},
		{"No_Proxy", true, true},
		{"ALL_PROXY", true, true},
		{"PROXY", true, false},
	} {
		if got := ValidEnvName(tt.name); got != tt.valid {
			t.Errorf("ValidEnvName(%q) = %v; want %v", tt.name, got, tt.valid)
		}
		if got := ReservedEnvName(tt.name); got != tt.reserved {
			t.Errorf("ReservedEnvName(%q) = %v; want %v", tt.name, got, tt.reserved)
		}
	}
}

func TestValidateEnv(t *testing.T) {
	big := map[string]string{}
	for i := 0; i < maxEnvVars+1; i++ {
		big[fmt.Sprintf("V%d", i)] = ""
	}
	for _, tt := range []struct {
		env  map[string]string
		want string // substring of the error; "" means no error
	}{
		{nil, ""},
		{map[string]string{"A": "1", "B": ""}, ""},
		{map[string]string{"A=B": "1"}, "name"},
		{map[string]string{"A\x00": "1"}, "name"},
		{map[string]string{"": "1"}, "name"},
		{map[string]string{"A": "x\x00y"}, "NUL"},
		{map[string]string{"STOCKADE_X": "1"}, "reserved"},
		{map[string]string{"http_proxy": "x"}, "reserved"},
		{map[string]string{"A": strings.Repeat("x", maxEnvBytes)}, "bytes"},
		{big, "variables"},
	} {
		err := ValidateEnv(tt.env)
		if tt.want == "" && err != nil || tt.want != "" && (!errors.Is(err, ErrInvalidEnv) || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ValidateEnv(%d vars) = %v; want %q", len(tt.env), err, tt.want)
		}
	}
}

func TestWritablePaths(t *testing.T) {
	for _, tt := range []struct {
		workdir string
		want    []string
	}{
		{"", []string{"/tmp", "/workspace"}},
		{"/workspace", []string{"/tmp", "/workspace"}},
		{"/src/app", []string{"/src/app", "/tmp"}},
		{"/tmp", []string{"/tmp"}},
		{"/tmp/work", []string{"/tmp", "/tmp/work"}},
		{"/tmpx", []string{"/tmp", "/tmpx"}},
		{"/a/../b/", []string{"/b", "/tmp"}},
	} {
		if got := WritablePaths(tt.workdir); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("WritablePaths(%q) = %q; want %q", tt.workdir, got, tt.want)
		}
	}
}

func TestTempName(t *testing.T) {
	a, b := TempName(), TempName()
	if !strings.HasPrefix(a, TempPrefix) || len(a) != len(TempPrefix)+16 || a == b {
		t.Errorf("TempName() = %q, %q; want distinct %q + 16 hex digits", a, b, TempPrefix)
	}
}

func TestPathNotWritableError(t *testing.T) {
	var err error = fmt.Errorf("docker: %w", &PathNotWritableError{Path: "/etc/x", Reason: "read-only root filesystem"})
	if !errors.Is(err, ErrNotWritable) {
		t.Errorf("errors.Is(%v, ErrNotWritable) = false", err)
	}
	var pe *PathNotWritableError
	if !errors.As(err, &pe) || pe.Path != "/etc/x" {
		t.Errorf("errors.As(%v) = %v", err, pe)
	}
	if errors.Is(err, ErrIsDirectory) {
		t.Errorf("errors.Is(%v, ErrIsDirectory) = true", err)
	}
	if got, want := pe.Error(), "sandbox: cannot write /etc/x: read-only root filesystem"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tt := range []struct {
		p  string
		ok bool
	}{
		{"/a", true},
		{"/a/b c", true},
		{"", false},
		{"/", false},
		{"a/b", false},
		{"/a/", false},
		{"/a/../b", false},
		{"/a//b", false},
		{"/a\nb", false},
		{"/a\x00b", false},
		{"/a\tb", false},
	} {
		if err := CheckPath(tt.p); (err == nil) != tt.ok {
			t.Errorf("CheckPath(%q) = %v; want ok=%v", tt.p, err, tt.ok)
		}
	}
}

// TestHardeningIsZero checks IsZero against every field of Hardening, so a
// field added later cannot be forgotten by it (and by the backends that
// call it).
func TestHardeningIsZero(t *testing.T) {
	if !(Hardening{}).IsZero() {
		t.Errorf("Hardening{}.IsZero() = false")
	}
	typ := reflect.TypeOf(Hardening{})
	for i := 0; i < typ.NumField(); i++ {
		var h Hardening
		f := reflect.ValueOf(&h).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(1)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0)) // empty but not nil
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", typ.Field(i).Name, f.Kind())
		}
		if h.IsZero() {
			t.Errorf("Hardening with %s set: IsZero() = true", typ.Field(i).Name)
		}
	}
}

// TestWriteRunsNestedRoots: a file goes in a run of the innermost place
// holding it (a workdir below /tmp is a filesystem of its own: a rename
// from /tmp's staging into it would cross filesystems).
func TestWriteRunsNestedRoots(t *testing.T) {
	roots := WritablePaths("/tmp/work")
	var got []string
	err := WriteRuns(context.Background(), "test", roots, []FileWrite{
		{Path: "/tmp/work/a"}, {Path: "/tmp/work/d/b"}, {Path: "/tmp/c"}, {Path: "/tmp/workx"},
	}, func(_ context.Context, bw *BulkWrite, files []FileWrite) error {
		got = append(got, path.Dir(bw.Manifest)+":"+strconv.Itoa(len(files)))
		return nil
	})
	if want := []string{"/tmp/work:2", "/tmp:2"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("WriteRuns = %q, %v; want runs %q", got, err, want)
	}
}
