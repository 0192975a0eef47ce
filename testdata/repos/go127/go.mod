module stockade.test/repo/go127

go 1.27
