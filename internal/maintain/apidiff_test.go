package maintain

import (
	"reflect"
	"testing"
)

// The go doc -all output of two versions of a package, as go 1.26 prints
// it.
const (
	docOld = `package dep // import "example.com/dep"

Package dep is a fixture.
func notADeclaration is prose at column 0 before the first section.

CONSTANTS

const (
	// A is first.
	A Mode = iota
	B
)

const Single = 1

VARIABLES

var ErrX = errors.New("x")

FUNCTIONS

func Keep(s string) string
    Keep keeps.

func Old(s string) string
    Old goes.

func Sig(a int) error

TYPES

type Mode int

type T struct {
	Field int
}

func NewT() *T

func (t *T) Gone() int

func (t T) Stays() string

type Shape interface {
	Area() float64
}
`
	docNew = `package dep // import "example.com/dep"

Package dep is a fixture.

CONSTANTS

const (
	// A is first.
	A Mode = iota
)

const Single = 2

FUNCTIONS

func Keep(s string) string

func Sig(a, b int) error

TYPES

type Mode int

type T struct {
	Field int
	More  string
}

func NewT() *T

func (t T) Stays() string

type Shape struct{}
`
)

func TestAPIDiff(t *testing.T) {
	got := diffDecls(apiDecls([]byte(docOld)), apiDecls([]byte(docNew)))
	want := []string{
		"const B removed",
		"func Old removed",
		"func Sig changed: func Sig(a int) error => func Sig(a, b int) error",
		"method T.Gone removed",
		"type Shape changed: type Shape interface { => type Shape struct{}",
		"var ErrX removed",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diffDecls =\n%q\nwant\n%q", got, want)
	}
	if _, ok := apiDecls([]byte(docOld))["func notADeclaration"]; ok {
		t.Error("package prose before the first section read as a declaration")
	}
}

func TestVersionDir(t *testing.T) {
	got, ok := versionDir("/go/pkg/mod/github.com/!burnt!sushi/toml@v1.3.0", "github.com/BurntSushi/toml", "v1.3.0", "v1.2.1")
	if !ok || got != "/go/pkg/mod/github.com/!burnt!sushi/toml@v1.2.1" {
		t.Errorf("versionDir = %q, %v", got, ok)
	}
	if _, ok := versionDir("/go/pkg/mod/x@v1.0.0", "x", "v1.1.0", "v1.0.0"); ok {
		t.Error("versionDir accepted a directory of another version")
	}
}
