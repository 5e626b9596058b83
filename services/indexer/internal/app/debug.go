package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/services/indexer/internal/projection"
)

// IndexState is what /debug/index reports: replicas that applied the same
// stream have the same digest.
type IndexState struct {
	StreamSequence uint64      `json:"stream_sequence"`
	Keys           int         `json:"keys"`
	Bytes          int64       `json:"bytes"`
	Evicted        uint64      `json:"evicted"`
	Digest         string      `json:"digest"`
	Applied        index.Stats `json:"applied"`
	// RestoredAt is the stream sequence of the snapshot the replica
	// started from (0: it built the index from the stream alone).
	RestoredAt uint64 `json:"restored_at"`
	// Shared is set when the index is the pool's shared Valkey/Redis one
	// (Applied then counts the batches this replica applied to it).
	Shared bool `json:"shared,omitempty"`
}

func indexState(ctx context.Context, p projected, restoredAt uint64) (IndexState, error) {
	// the sequence first: the digest covers at least that much
	st := IndexState{StreamSequence: p.StreamSequence(), Applied: p.Stats(), RestoredAt: restoredAt}
	switch p := p.(type) {
	case *projection.Projector:
		idx := p.Index()
		st.Keys, st.Bytes, st.Evicted, st.Digest = idx.Len(), idx.Bytes(), idx.Evicted(), strconv.FormatUint(idx.Digest(), 16)
	case *projection.Shared:
		// a scan of the server: for debugging, not the request path
		n, err := p.Index().Len(ctx)
		if err != nil {
			return st, err
		}
		d, err := p.Index().Digest(ctx)
		if err != nil {
			return st, err
		}
		st.Keys, st.Digest, st.Shared = n, strconv.FormatUint(d, 16), true
	}
	return st, nil
}

// debugHandler serves /debug/index beside the ops endpoints.
func debugHandler(ops http.Handler, p projected, restoredAt uint64) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ops)
	mux.HandleFunc("GET /debug/index", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		st, err := indexState(ctx, p, restoredAt)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
	return mux
}
