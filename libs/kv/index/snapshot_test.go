package index

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func populated(t testing.TB) *Index {
	t.Helper()
	x := newIndex(t, Config{BlockSize: 4, Shards: 4})
	for i := range 20 {
		pod := fmt.Sprintf("pod-%d", i%3)
		x.Apply(pod, model, batch(stored([]uint64{uint64(10*i + 1), uint64(10*i + 2)}, 0, false, seq(i%5*100, 8), 4, []string{"", "CPU"}[i%2])))
	}
	x.Apply("pod-0", model, batch(removed("", 1, 21)))
	// an engine block of two index blocks
	x2 := stored([]uint64{999}, 0, false, seq(5000, 8), 8, "")
	x.Apply("pod-2", model, batch(x2))
	return x
}

func TestSnapshotRoundTrip(t *testing.T) {
	x := populated(t)
	var buf bytes.Buffer
	if err := x.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	// restored with another sharding
	y, err := ReadSnapshot(bytes.NewReader(buf.Bytes()), Config{BlockSize: 4, Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	if x.Digest() != y.Digest() || x.Len() != y.Len() {
		t.Fatalf("restored index differs: %d keys vs %d", y.Len(), x.Len())
	}
	keys := x.Keyer().Prompt(nil, model, seq(100, 8))
	cands := []string{"pod-0", "pod-1", "pod-2"}
	if a, b := x.Match(keys, cands, 0, nil), y.Match(keys, cands, 0, nil); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("match %v, restored %v", a, b)
	}
	// events go on applying to the restored index as to the original
	more := batch(stored([]uint64{7777}, 12, true, seq(1, 4), 4, ""), removed("CPU", 22))
	x.Apply("pod-1", model, more)
	y.Apply("pod-1", model, more)
	if x.Digest() != y.Digest() {
		t.Fatal("the restored index diverged on the next events")
	}
}

func TestSnapshotKeepsRecency(t *testing.T) {
	x := newIndex(t, Config{BlockSize: 1, Size: 4, Shards: 1})
	x.Apply("pod-a", model, batch(stored([]uint64{1, 2, 3, 4}, 0, false, seq(0, 4), 1, "")))
	var buf bytes.Buffer
	if err := x.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	y, err := ReadSnapshot(&buf, Config{BlockSize: 1, Size: 4, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	// one more key evicts the oldest in both
	ev := batch(stored([]uint64{5}, 4, true, seq(4, 1), 1, ""))
	x.Apply("pod-a", model, ev)
	y.Apply("pod-a", model, ev)
	keys := x.Keyer().Prompt(nil, model, seq(0, 5))
	if len(y.Lookup(keys[0])) != 0 || len(y.Lookup(keys[1])) != 1 || x.Digest() != y.Digest() {
		t.Fatal("the restored index forgot which keys are oldest")
	}
}

func TestSnapshotRejectsCorruptionAndMismatch(t *testing.T) {
	x := populated(t)
	var buf bytes.Buffer
	if err := x.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	if _, err := ReadSnapshot(bytes.NewReader(good), Config{BlockSize: 16}); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("another block size: %v", err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not a snapshot", []byte("hello world, this is not an index")},
		{"truncated", good[:len(good)/2]},
		{"flipped byte", flip(good, len(good)/3)},
		{"trailing data", append(append([]byte(nil), good...), 0)},
	} {
		if _, err := ReadSnapshot(bytes.NewReader(c.data), Config{BlockSize: 4}); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0x40
	return out
}

func FuzzReadSnapshot(f *testing.F) {
	x := populated(f)
	var buf bytes.Buffer
	if err := x.WriteSnapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		y, err := ReadSnapshot(bytes.NewReader(data), Config{BlockSize: 4, Shards: 2})
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error %v does not wrap ErrSnapshot", err)
			}
			return
		}
		// what reads back writes back the same
		var out bytes.Buffer
		if err := y.WriteSnapshot(&out); err != nil {
			t.Fatal(err)
		}
		z, err := ReadSnapshot(&out, Config{BlockSize: 4, Shards: 2})
		if err != nil || z.Digest() != y.Digest() {
			t.Fatalf("rewritten snapshot: %v", err)
		}
	})
}
