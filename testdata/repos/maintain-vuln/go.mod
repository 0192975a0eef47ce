module stockade.test/repo/maintain-vuln

go 1.24

require (
	stockade.test/greet v1.0.0
	stockade.test/vulnlib v1.0.0
)
