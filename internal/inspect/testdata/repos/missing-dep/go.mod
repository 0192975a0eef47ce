module stockade.test/repo/missing-dep

go 1.24

require stockade.test/greet v1.9.0
