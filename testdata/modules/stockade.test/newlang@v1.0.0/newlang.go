// Package newlang is a fixture dependency: v1.0.0 declares go 1.22.
package newlang

// Name is the package's name.
const Name = "newlang"
