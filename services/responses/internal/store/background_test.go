package store

import (
	"errors"
	"testing"
)

func TestCheckTail(t *testing.T) {
	evs := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, c := range []struct {
		n, from int
		events  [][]byte
		add     int
		err     error
	}{
		{n: 0, from: 0, events: evs, add: 3},
		{n: 2, from: 0, events: evs, add: 1},
		{n: 3, from: 0, events: evs, add: 0},
		{n: 5, from: 1, events: evs, add: 0},
		{n: 1, from: 2, events: evs, err: ErrConflict},
		{n: 0, from: -1, events: evs, err: ErrConflict},
		{n: MaxEvents - 2, from: MaxEvents - 2, events: evs, err: ErrTooLarge},
		{n: MaxEvents - 3, from: MaxEvents - 3, events: evs, add: 3},
		{n: 0, from: 0, events: [][]byte{make([]byte, MaxEventBytes+1)}, err: ErrTooLarge},
	} {
		add, err := CheckTail(c.n, c.from, c.events)
		if !errors.Is(err, c.err) || (err == nil && len(add) != c.add) {
			t.Errorf("CheckTail(%d, %d, 3 events) = %d events, %v; want %d, %v", c.n, c.from, len(add), err, c.add, c.err)
		}
	}
}
