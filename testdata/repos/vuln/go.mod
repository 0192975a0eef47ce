module stockade.test/repo/vuln

go 1.24

require (
	stockade.test/othermod v1.0.0
	stockade.test/vulnlib v1.0.0
)
