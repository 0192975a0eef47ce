// Package newlang is a fixture dependency: v1.0.1, a patch release that
// declares go 1.25, so go get raises the go directive of a module that
// declares less (the admission gate refuses it).
package newlang

// Name is the package's name.
const Name = "newlang"
