package main

// The docs' examples agree with what the built paddle-monitor prints: every
// `paddle-monitor report` example of README.md and docs/ that shows its output is
// run against the report fixture (on which the docs' figures are based),
// docs/monitor.md's usage block is the program's, its settings table names
// every flag of serve, and its token example prints what it shows.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// codeBlock is one fenced block of a Markdown file.
type codeBlock struct {
	lang, text string
	line       int // the fence's line, for messages
}

// codeBlocks returns a Markdown file's fenced blocks in order.
func codeBlocks(t *testing.T, file string) []codeBlock {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []codeBlock
	var cur *codeBlock
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &codeBlock{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return blocks
}

// shellWords splits one command line as the shell would for the docs'
// examples: backslash-newline continuations, single and double quotes.
func shellWords(s string) []string {
	s = strings.ReplaceAll(s, "\\\n", " ")
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// reportExample is a documented `paddle-monitor report` command and the
// output the docs show for it: a sh block followed by a plain block, or a
// console block whose first line is the command.
type reportExample struct {
	file          string
	line          int
	command, want string
}

func reportExamples(t *testing.T, files ...string) []reportExample {
	t.Helper()
	var ex []reportExample
	for _, f := range files {
		blocks := codeBlocks(t, f)
		for i, b := range blocks {
			switch {
			case b.lang == "sh" && strings.HasPrefix(b.text, "paddle-monitor report") && i+1 < len(blocks) && blocks[i+1].lang == "":
				ex = append(ex, reportExample{f, b.line, b.text, blocks[i+1].text})
			case b.lang == "" || b.lang == "console":
				first, rest, _ := strings.Cut(b.text, "\n")
				if cmd, ok := strings.CutPrefix(first, "$ bin/paddle-monitor report"); ok && !strings.Contains(rest, "\n$ ") {
					ex = append(ex, reportExample{f, b.line, "paddle-monitor report" + cmd, rest})
				}
			}
		}
	}
	return ex
}

func TestDocsReportExamples(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := reportExamples(t, append(docs, "../../README.md")...)
	// The examples of --month 2025-12 run against the MIG fixture (its own
	// database, with its prices), the others against November's.
	storetest.Each(t, func(t *testing.T, novDB string) {
		s := startServer(t, novDB)
		postFixture(t, s, "")
		decDB := storetest.SQLiteDSN(t)
		if strings.HasPrefix(novDB, "postgres") {
			decDB = storetest.PostgresDSN(t)
		}
		postFixtureFile(t, startServer(t, decDB), "", "fixture-mig.json")
		ran := 0
		for _, b := range examples {
			args := shellWords(b.command)[1:]
			db, prices := novDB, fixtureFile(t, "prices.json")
			if strings.Contains(b.command, "--month 2025-12") {
				db, prices = decDB, fixtureFile(t, "prices-mig.json")
			}
			for j := range args {
				switch args[j] {
				case "--db":
					args[j+1] = db
				case "--prices":
					args[j+1] = prices
				}
			}
			if !strings.Contains(b.command, "--db") {
				args = append(args, "--db", db)
			}
			r := runMonitor(t, args...)
			if r.code != 0 || r.stdout != b.want {
				t.Errorf("%s:%d: paddle-monitor %s: exit %d %s\nprints:\n%s\nthe docs show:\n%s",
					b.file, b.line, strings.Join(args, " "), r.code, r.stderr, r.stdout, b.want)
			}
			ran++
		}
		if ran < 4 {
			t.Errorf("ran %d report examples of the docs, want the four that show their output (docs/cost.md, README.md)", ran)
		}
	})
}

func TestDocsMonitorUsage(t *testing.T) {
	blocks := codeBlocks(t, "../../docs/monitor.md")
	help := runMonitor(t, "--help").stdout
	usage := help[:strings.Index(help, "\n\n")+1]
	if blocks[0].text != usage {
		t.Errorf("docs/monitor.md's first block:\n%s\npaddle-monitor --help prints:\n%s", blocks[0].text, usage)
	}

	// Every flag of serve is in the settings table, with its variable.
	doc, err := os.ReadFile("../../docs/monitor.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`(?m)^\s+(--[a-z-]+)\S* .*\(env (\w+)\)`).FindAllStringSubmatch(runMonitor(t, "serve", "--help").stdout, -1)
	if len(flags) < 8 {
		t.Fatalf("serve --help lists %d flags with a variable", len(flags))
	}
	for _, f := range flags {
		if !strings.Contains(string(doc), "| `"+f[1]+"` | `"+f[2]+"` |") {
			t.Errorf("docs/monitor.md's settings table has no row | `%s` | `%s` |", f[1], f[2])
		}
	}

	// The token example prints what the docs show (but the secrets).
	for _, b := range blocks {
		if b.lang != "console" || !strings.HasPrefix(b.text, "$ paddle-monitor token search-team") {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
		args := shellWords(strings.TrimPrefix(lines[0], "$ paddle-monitor "))
		for j := range args {
			if args[j] == "--add-to" {
				args[j+1] = filepath.Join(t.TempDir(), "tokens.json")
			}
		}
		r := runMonitor(t, args...)
		got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(got) != 2 || !strings.HasPrefix(got[0], "pdm_") || !strings.HasPrefix(lines[1], "pdm_") {
			t.Errorf("docs/monitor.md:%d: %v: exit %d\n%s%s", b.line, args, r.code, r.stdout, r.stderr)
			continue
		}
		var shown, printed map[string]any
		if err := json.Unmarshal([]byte(lines[2]), &shown); err != nil {
			t.Errorf("docs/monitor.md:%d: the entry shown is not JSON: %v", b.line, err)
			continue
		}
		json.Unmarshal([]byte(got[1]), &printed)
		delete(shown, "sha256")
		delete(printed, "sha256")
		if want, got := mustJSON(shown), mustJSON(printed); want != got {
			t.Errorf("docs/monitor.md:%d: the entry shown %s, printed %s", b.line, want, got)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
