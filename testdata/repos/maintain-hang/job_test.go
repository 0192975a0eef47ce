package job

import "testing"

func TestRun(t *testing.T) { Run() }
