module stockade.test/repo/nested-module/tools

go 1.24
