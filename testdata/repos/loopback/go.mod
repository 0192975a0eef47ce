module stockade.test/repo/loopback

go 1.24
