package gate

// What the external tests (telemetry_test.go) share with the package's own.
var TestGate = testGate

type FakeDNS = fakeDNS
