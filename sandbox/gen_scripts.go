//go:build ignore

// gen_scripts writes zscripts.go: each scripts/*.sh as a Go string
// constant (internal/scriptgen), so that the …Shell scripts are constants,
// as the first API had them, while the scripts stay files the tests lint
// and run on the host. TestScriptsGenerated fails when it is stale.
package main

import (
	"fmt"
	"os"

	"github.com/stockade/stockade/sandbox/internal/scriptgen"
)

func main() {
	src, err := scriptgen.Render("scripts")
	if err == nil {
		err = os.WriteFile(scriptgen.Output, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen_scripts:", err)
		os.Exit(1)
	}
}
