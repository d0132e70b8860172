package access

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

func TestScopeAllows(t *testing.T) {
	for _, tc := range []struct {
		scope          *Scope
		project, owner string
		want           bool
	}{
		{nil, "anything", "anyone", true},
		{&Scope{Projects: []string{"search_*"}}, "search_ranking", "ann", true},
		{&Scope{Projects: []string{"search_*"}}, "SEARCH_Ranking", "ann", true},
		{&Scope{Projects: []string{"SEARCH_*"}}, "search_ranking", "ann", true},
		{&Scope{Projects: []string{"search_*"}}, "admin", "ann", false},
		{&Scope{Projects: []string{"search_*"}, Owners: []string{"*@example.com"}}, "search_a", "ann@example.com", true},
		{&Scope{Projects: []string{"search_*"}, Owners: []string{"*@example.com"}}, "search_a", "ann@evil.com", false},
		{&Scope{Projects: []string{"[a-c]*"}}, "b1", "x", true},
		{&Scope{Projects: []string{"[a-c]*"}}, "d1", "x", false},
		{&Scope{Projects: []string{"a?"}}, "ab", "x", true},
		{&Scope{Projects: []string{}}, "a", "x", false},
	} {
		if got := tc.scope.Allows(tc.project, tc.owner); got != tc.want {
			t.Errorf("%+v.Allows(%q, %q) = %v, want %v", tc.scope, tc.project, tc.owner, got, tc.want)
		}
	}
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestParseAndLookup(t *testing.T) {
	content := `{"tokens": [
	  {"name": "search-team", "sha256": "` + hash("s3cret") + `", "projects": ["search_*"], "owners": ["*@example.com"]},
	  {"name": "finance", "sha256": "` + strings.ToUpper(hash("admin!")) + `", "admin": true}
	]}`
	set, err := Parse([]byte(content), "tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	if tok := set.Lookup("s3cret"); tok == nil || tok.Name != "search-team" || tok.Scope() == nil {
		t.Fatalf("Lookup(s3cret) = %+v", tok)
	}
	if tok := set.Lookup("admin!"); tok == nil || tok.Name != "finance" || tok.Scope() != nil {
		t.Fatalf("Lookup(admin!) = %+v", tok)
	}
	for _, bad := range []string{"", "s3cre", "s3cret ", hash("s3cret")} {
		if tok := set.Lookup(bad); tok != nil {
			t.Errorf("Lookup(%q) = %s, want nil", bad, tok.Name)
		}
	}
}

func TestParseErrors(t *testing.T) {
	h := hash("x")
	for _, tc := range []struct{ content, want string }{
		{`not json`, "tokens file t.json: not the expected JSON"},
		{`{"tokens": [{"name": "a", "sha256": "` + h + `", "projects": ["p"], "extra": 1}]}`, `unknown field "extra"`},
		{`{"tokens": [{"sha256": "` + h + `", "projects": ["p"]}]}`, "tokens[0]: name is empty"},
		{`{"tokens": [{"name": "a", "sha256": "abc", "projects": ["p"]}]}`, "tokens[0] (a): sha256 must be 64 hexadecimal digits"},
		{`{"tokens": [{"name": "a", "sha256": "` + h + `"}]}`, "tokens[0] (a): projects is empty"},
		{`{"tokens": [{"name": "a", "sha256": "` + h + `", "projects": ["[a"]}]}`, `"[a" is not a valid glob`},
		{`{"tokens": [{"name": "a", "sha256": "` + h + `", "admin": true}, {"name": "a", "sha256": "` + h + `", "admin": true}]}`, "tokens[1] (a): name used twice"},
	} {
		_, err := Parse([]byte(tc.content), "t.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s): %v, want %q", tc.content, err, tc.want)
		}
	}
}

func TestMint(t *testing.T) {
	secret, entry, err := Mint("ci", []string{"search_*"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"tokens": []*Token{entry}})
	set, err := Parse(b, "minted")
	if err != nil {
		t.Fatal(err)
	}
	if tok := set.Lookup(secret); tok == nil || tok.Name != "ci" {
		t.Fatalf("the minted token does not match its own entry: %s", b)
	}
	if strings.Contains(string(b), secret) {
		t.Fatal("the entry holds the secret")
	}
	if _, _, err := Mint("x", nil, nil, false); err == nil || !strings.Contains(err.Error(), "--project is required") {
		t.Fatalf("no project: %v", err)
	}
	if _, _, err := Mint("x", []string{"p"}, nil, true); err == nil {
		t.Fatal("admin with projects accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"tokens": [{"name": "a", "sha256": "` + hash("x") + `", "projects": ["p*"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := Parse(b, "fuzz")
		if err == nil {
			set.Lookup("x")
		}
	})
}
