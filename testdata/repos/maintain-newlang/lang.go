// Package lang is the maintain-newlang fixture: newlang v1.0.1 declares
// go 1.25, so go get would raise this module's go directive.
package lang

import "stockade.test/newlang"

// Name is newlang's name.
const Name = newlang.Name
