package service

import "testing"

func TestPostgres(t *testing.T) {
	if err := Ping("tcp", "127.0.0.1:5432"); err != nil {
		t.Fatal(err)
	}
}

func TestDockerDaemon(t *testing.T) {
	if err := Ping("unix", "/var/run/docker.sock"); err != nil {
		t.Fatal(err)
	}
}
