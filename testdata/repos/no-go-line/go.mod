module stockade.test/repo/no-go-line

require stockade.test/greet v1.0.0
