package testjson

import (
	"reflect"
	"testing"
)

func TestNeedsNewerGo(t *testing.T) {
	// Lines as go1.26.8 printed them against the fixture proxy.
	tests := []struct {
		name, stderr string
		want         []NewerGo
	}{
		{"go get version", "go: downloading stockade.test/nextgo v0.2.0\n" +
			"go: stockade.test/nextgo@v0.2.0 requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"stockade.test/nextgo", "v0.2.0", "1.99", "1.26.8"}}},
		{"go get latest", "go: stockade.test/nextgo@latest: stockade.test/nextgo@v0.2.0 requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"stockade.test/nextgo", "v0.2.0", "1.99", "1.26.8"}}},
		{"go mod download", "go: stockade.test/nextgo@v0.2.0: module stockade.test/nextgo@v0.2.0 requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"stockade.test/nextgo", "v0.2.0", "1.99", "1.26.8"}}},
		{"go mod download, then go build", "go: stockade.test/nextgo@v0.2.0: module stockade.test/nextgo@v0.2.0 requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n" +
			"go: downloading stockade.test/greet v1.0.0\n" +
			"go: stockade.test/nextgo@v0.2.0 requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"stockade.test/nextgo", "v0.2.0", "1.99", "1.26.8"}}},
		{"main module (go build, go mod download)", "go: go.mod requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"", "", "1.99", "1.26.8"}}},
		{"duplicates", "go: a.test/m@v1.0.0 requires go >= 1.30 (running go 1.26.8; GOTOOLCHAIN=local)\n" +
			"go: a.test/m@v1.0.0 requires go >= 1.30 (running go 1.26.8; GOTOOLCHAIN=local)\n",
			[]NewerGo{{"a.test/m", "v1.0.0", "1.30", "1.26.8"}}},
		{"other errors", "go: module stockade.test/greet/v3: reading file:///p/stockade.test/greet/v3/@v/list: no such file or directory\n", nil},
		{"not at line start", "note: x@v1 requires go >= 1.99 (running go 1.26.8)\n", nil},
		{"go mod download -json error field", `"Error": "stockade.test/nextgo@v0.2.0 requires go \u003e= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)",` + "\n", nil},
	}
	for _, tt := range tests {
		if got := NeedsNewerGo([]byte(tt.stderr)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: NeedsNewerGo = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}
