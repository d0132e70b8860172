package termtable

import (
	"errors"
	"strings"
	"testing"
)

func TestHours(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.05, "0.0500"}, {0.123456, "0.123"}, {0.0001234, "0.000123"}, {1, "1.00"}, {1.25, "1.25"},
		{12.345, "12.3"}, {9.996, "10.0"}, {99.96, "100"}, {123.456, "123"}, {999.6, "1000"}, {4567.2, "4567"},
		{-12.345, "-12.3"}, {36, "36.0"},
	} {
		if got := Hours(c.in); got != c.want {
			t.Errorf("Hours(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMoneyPercentShorten(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Money(401), "401.00"}, {Money(2.965), "2.96"}, {Money(0.005), "0.01"}, {Money(1234567.891), "1234567.89"},
		{Percent(0.844), "84.4 %"}, {Percent(9.99), "999.0 %"}, {Percent(9.991), ">999 %"}, {Percent(0), "0.0 %"},
		{Shorten("abc", 3), "abc"}, {Shorten("abcd", 3), "ab…"}, {Shorten("ééééé", 4), "ééé…"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

type row struct {
	name string
	a, b int
}

var cols = []Column[row]{
	{Name: "name", Key: true, Cell: func(r row) string { return r.name }},
	{Name: "extra", Cell: func(r row) string { return "x" }},
	{Name: "bbbb", Priority: 2, Cell: func(r row) string { return strings.Repeat("b", r.b) }},
	{Name: "a", Priority: 1, Cell: func(r row) string { return strings.Repeat("a", r.a) }},
}

func TestWrite(t *testing.T) {
	rows := []row{{"short", 1, 2}, {"a-name-longer-than-ten", 3, 9}}
	for _, c := range []struct {
		name    string
		opt     Options
		want    string
		dropped []string
	}{
		{"fits", Options{Width: 40, MaxKey: 10},
			"name          a       bbbb\n" +
				"short         a         bb\n" +
				"a-name-lo…  aaa  bbbbbbbbb\n", nil},
		{"drops from the right", Options{Width: 20, MaxKey: 10},
			"name          a\n" +
				"short         a\n" +
				"a-name-lo…  aaa\n", []string{"bbbb"}},
		{"keys alone too wide", Options{Width: 5, MaxKey: 10},
			"name\nshort\na-name-lo…\n", []string{"bbbb", "a"}},
		{"wide: declared order, none dropped", Options{Width: 5, MaxKey: 10, Wide: true},
			"name        extra       bbbb    a\n" +
				"short           x         bb    a\n" +
				"a-name-lo…      x  bbbbbbbbb  aaa\n", nil},
		{"named: that order, none dropped", Options{Width: 5, MaxKey: 40, Columns: []string{"bbbb", "name", "extra"}},
			"name                         bbbb  extra\n" +
				"short                          bb      x\n" +
				"a-name-longer-than-ten  bbbbbbbbb      x\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			lay, err := Write(&b, cols, rows, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), c.want)
			}
			if strings.Join(lay.Dropped, ",") != strings.Join(c.dropped, ",") {
				t.Errorf("dropped %q, want %q", lay.Dropped, c.dropped)
			}
		})
	}
	_, err := Write(&strings.Builder{}, cols, rows, Options{Columns: []string{"a", "nope"}})
	if !errors.Is(err, ErrUnknownColumn) || err.Error() != `unknown column "nope": allowed: name, extra, bbbb, a` {
		t.Errorf("unknown column: %v", err)
	}
}
