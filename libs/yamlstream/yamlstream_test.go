package yamlstream

import (
	"testing"
)

func TestSplit(t *testing.T) {
	in := "a: 1\n---\nb: 2\n--- c: 3\nd: 4\n--- # comment\n---foo: 5\n...\ne: |\n  --- not a separator\n"
	got := Split([]byte(in))
	want := []Document{
		{Text: []byte("a: 1\n"), Line: 1},
		{Text: []byte("b: 2\n"), Line: 3},
		{Text: []byte("c: 3\nd: 4\n"), Line: 4},
		{Text: []byte("---foo: 5\n"), Line: 7},
		{Text: []byte("e: |\n  --- not a separator\n"), Line: 9},
	}
	if len(got) != len(want) {
		t.Fatalf("%d documents: %v", len(got), got)
	}
	for i := range want {
		if string(got[i].Text) != string(want[i].Text) || got[i].Line != want[i].Line {
			t.Errorf("document %d: %q at line %d, want %q at line %d", i, got[i].Text, got[i].Line, want[i].Text, want[i].Line)
		}
	}
	if docs := Split(nil); len(docs) != 1 || len(docs[0].Text) != 0 {
		t.Errorf("empty stream: %v", docs)
	}
}

func TestShiftLines(t *testing.T) {
	if got := ShiftLines("yaml: line 3: mapping values are not allowed; line 10 too", 5); got != "yaml: line 7: mapping values are not allowed; line 14 too" {
		t.Errorf("got %q", got)
	}
	if got := ShiftLines("line 3", 1); got != "line 3" {
		t.Errorf("first line 1: %q", got)
	}
}

// FuzzSplit: the documents hold every byte of the stream but the
// separators, in order, and their lines increase.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("a: 1\n---\nb: 2\n--- c\n...\n"))
	f.Add([]byte("--- # x\r\n---\t y\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs := Split(data)
		total := 0
		for i, d := range docs {
			total += len(d.Text)
			if i > 0 && d.Line < docs[i-1].Line {
				t.Fatalf("lines go back: %v", docs)
			}
		}
		if total > len(data)+len(docs) {
			t.Fatalf("documents hold %d bytes of %d", total, len(data))
		}
	})
}
