package testjson

import (
	"strings"
)

// goInfo lists the prefixes of go command lines that report progress, not
// failure; they are neither findings nor reasons.
var goInfo = []string{
	"go: downloading ",
	"go: finding module ",
	"go: found ",
	"go: extracting ",
	"go: added ",
	"go: upgraded ",
}

// ParseBuild judges `go build` output (stderr). Compile and load errors
// are KindBuild findings; "go: ..." errors are KindToolchain findings that
// make the check Inconclusive, because the code was not judged.
func ParseBuild(in Input) *Report {
	r := &Report{}
	diagnostics(r, in.Stderr, in, KindBuild, false)
	judgeDiag(r, in)
	return r
}

// ParseVet judges `go vet` output (stderr). Analyzer diagnostics are
// KindVet findings; errors vet reports as "vet: file:line: ..." (the
// package did not type-check) and load errors are KindBuild findings.
func ParseVet(in Input) *Report {
	r := &Report{}
	diagnostics(r, in.Stderr, in, KindVet, false)
	judgeDiag(r, in)
	return r
}

func judgeDiag(r *Report, in Input) {
	common(r, in)
	code, toolchain := 0, 0
	for _, f := range r.Findings {
		if f.Kind == KindToolchain {
			toolchain++
		} else {
			code++
		}
	}
	code += r.Dropped
	switch {
	case toolchain > 0:
		r.reason("the go command failed before judging the code")
	case in.ExitCode == 0 && code > 0:
		r.reason("exit status 0 with %d findings", code)
	case in.ExitCode != 0 && code == 0:
		r.reason("exit status %d that no finding explains; stderr: %s", in.ExitCode, quote(string(in.Stderr)))
	}
	r.finish()
}

// common records the reasons every check shares.
func common(r *Report, in Input) {
	if in.TimedOut {
		r.reason("timed out")
	}
	if in.Truncated {
		r.reason("output truncated")
	}
}

// diagnostics parses compiler, vet and go command text: "# pkg" headers,
// "file:line:col: message" lines, tab-indented continuation lines, and
// other lines, which start a finding of their own. kind is the kind of a
// positional diagnostic that carries no "vet: " prefix. With attributed,
// only go command errors and lines that can be tied to a package (by a
// header or a file in the module) become findings: go test's stderr is not
// where failures of code that built are reported, so other text there
// cannot explain a failure.
func diagnostics(r *Report, text []byte, in Input, kind Kind, attributed bool) {
	var (
		header string   // package from the last "# pkg" line
		cur    *Finding // finding being continued
		raw    []string // its raw lines
	)
	flush := func() {
		if cur == nil {
			return
		}
		cur.Message = Normalize(cur.Message, in.ModuleDir)
		cur.Detail = strings.Join(raw, "\n")
		if !attributed || cur.Package != "" || cur.Kind == KindToolchain {
			r.add(*cur)
		}
		cur, raw = nil, nil
	}
	for _, line := range lines(text) {
		if cur != nil && (strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "    ")) {
			cur.Message += "\n" + strings.TrimSpace(line)
			raw = append(raw, line)
			continue
		}
		flush()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if h, ok := strings.CutPrefix(line, "# "); ok {
			// "# pkg", "# pkg [pkg.test]"; vet adds "# [pkg]", which names
			// nothing new.
			if !strings.HasPrefix(h, "[") {
				header, _, _ = strings.Cut(h, " ")
			}
			continue
		}
		if isGoInfo(line) {
			continue
		}
		if strings.HasPrefix(line, "go: ") {
			cur = &Finding{Kind: KindToolchain, Message: strings.TrimPrefix(line, "go: ")}
			raw = []string{line}
			continue
		}
		k := kind
		body := line
		if b, ok := strings.CutPrefix(line, "vet: "); ok {
			k, body = KindBuild, b
		}
		f := Finding{Kind: k, Package: header, Message: body}
		if m := posRE.FindStringSubmatch(body); m != nil {
			f.File = modRel(m[1], in.ModuleDir)
			f.Line, f.Col = atoi(m[2]), atoi(m[3])
			f.Message = m[4]
			if f.Package == "" {
				f.Package = pkgOf(f.File, in.ModulePath)
			}
		} else if k == KindVet {
			// Vet prints analyzer findings with positions only; anything
			// else is a load error.
			f.Kind = KindBuild
		}
		cur, raw = &f, []string{line}
	}
	flush()
}

func isGoInfo(line string) bool {
	for _, p := range goInfo {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}
