// Package tools is a module inside the nested-module fixture.
package tools
