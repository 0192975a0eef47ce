// Package writes has tests that write into their own directory, as many
// published modules' tests do: they pass on a developer's machine, and must
// pass in a validation's throwaway working tree.
package writes

// Greeting is what the tests write.
const Greeting = "hello"
