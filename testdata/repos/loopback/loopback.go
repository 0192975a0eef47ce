// Package loopback serves a greeting over HTTP; its tests reach it on
// loopback the ways published modules' tests do.
package loopback

import (
	"fmt"
	"net/http"
)

// Handler greets.
func Handler(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }
