package vulndbtest

import (
	"os"
	"testing"

	"github.com/stockade/stockade/internal/vulndb"
)

// TestWriteFixture writes the fixture database for the host's image into
// $STOCKADE_FIXTURE_VULNDB when it is set, for trying `stockade scan` by
// hand (README); it checks the fixture either way.
func TestWriteFixture(t *testing.T) {
	goVersion := os.Getenv("STOCKADE_FIXTURE_GO")
	if goVersion == "" {
		goVersion = "go1.26.8"
	}
	es, err := Entries(goVersion)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("STOCKADE_FIXTURE_VULNDB")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := vulndb.Write(dir, es); err != nil {
		t.Fatal(err)
	}
	db, err := vulndb.Open(dir)
	if err != nil || db.Entries != 7 {
		t.Fatalf("the fixture database: %+v, %v", db, err)
	}
}
