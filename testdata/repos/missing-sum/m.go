package m

// Hello is a greeting of our own.
func Hello() string { return "hello" }
