// Package store defines what every responses backend provides: stored
// turns of Responses API conversations, by id, with expiry.
package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Record is one stored response. Data is opaque to the store.
type Record struct {
	ID         string
	PreviousID string
	CreatedAt  time.Time
	Data       []byte
	// Revision names this version of the record: the writer gives each
	// Put and Swap a new one (NewRevision), and Swap compares it.
	Revision uint64
}

// Size is what counts against maxEntryBytes: the record's bytes.
func (r *Record) Size() int { return len(r.ID) + len(r.PreviousID) + len(r.Data) }

// Tier names which backend answered a read.
type Tier string

// The tiers.
const (
	TierMemory Tier = "memory"
	TierRedis  Tier = "redis"
	TierMongo  Tier = "mongo"
)

// Errors the backends return (wrapped).
var (
	ErrNotFound = errors.New("response not found")
	ErrTooLarge = errors.New("response too large")
	ErrNoID     = errors.New("response has no id")
	// ErrConflict is Swap's answer when the record no longer holds the
	// revision the caller read.
	ErrConflict = errors.New("the record changed since it was read")
)

// Store is a responses backend. Implementations are safe for concurrent
// use.
type Store interface {
	// Put stores r, replacing a record with the same id. It returns once
	// the record is durable in the first tier.
	Put(ctx context.Context, r *Record) error
	// Get returns a live record and the tier that had it, or ErrNotFound.
	Get(ctx context.Context, id string) (*Record, Tier, error)
	// Swap stores r in place of the record r.ID only if that record still
	// holds revision want: ErrConflict when it holds another, ErrNotFound
	// when there is none. A swapped record lives ttl from the swap.
	Swap(ctx context.Context, r *Record, want uint64) error
	// Delete removes the record from every tier, or returns ErrNotFound.
	Delete(ctx context.Context, id string) error
	// Close releases the backend's connections and stops its workers.
	Close() error
}

// NewRevision returns a fresh revision: random, so that a revision read
// before a record was replaced, deleted or recreated never matches again
// (no counter to keep across tiers), and never 0 (a record written before
// revisions existed).
func NewRevision() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if r := binary.BigEndian.Uint64(b[:]); r != 0 {
			return r
		}
	}
}

// CheckPut validates a record against a size limit (0: none).
func CheckPut(r *Record, maxBytes int) error {
	if r == nil || r.ID == "" {
		return ErrNoID
	}
	if maxBytes > 0 && r.Size() > maxBytes {
		return fmt.Errorf("%w: %d bytes, maxEntryBytes is %d", ErrTooLarge, r.Size(), maxBytes)
	}
	return nil
}

// ChainTooLongError is GetChain's answer when the chain is longer than
// its limit.
type ChainTooLongError struct{ Limit int }

func (e *ChainTooLongError) Error() string {
	return fmt.Sprintf("the conversation is longer than %d responses", e.Limit)
}

// GetChain follows previous ids from id and returns the chain oldest
// first (the record of id last). A missing link is ErrNotFound naming it;
// more than limit records (or a cycle) is a *ChainTooLongError.
func GetChain(ctx context.Context, s Store, id string, limit int) ([]*Record, error) {
	var chain []*Record
	seen := map[string]bool{}
	for next := id; next != ""; {
		if len(chain) == limit || seen[next] {
			return nil, &ChainTooLongError{Limit: limit}
		}
		seen[next] = true
		r, _, err := s.Get(ctx, next)
		if err != nil {
			if next != id && errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("%w: %s, which %s continues", ErrNotFound, next, chain[len(chain)-1].ID)
			}
			return nil, err
		}
		chain = append(chain, r)
		next = r.PreviousID
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}
