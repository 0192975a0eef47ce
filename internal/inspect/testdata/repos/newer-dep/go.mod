module stockade.test/repo/newer-dep

go 1.24

require stockade.test/nextgo v0.2.0
