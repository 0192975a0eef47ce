module stockade.test/repo/checksum-mismatch

go 1.24

require stockade.test/greet v1.0.0
