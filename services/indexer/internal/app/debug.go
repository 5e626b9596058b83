package app

import (
	"encoding/json"
	"net/http"
	"strconv"

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
}

func indexState(p *projection.Projector, restoredAt uint64) IndexState {
	// the sequence first: the digest covers at least that much
	seq := p.StreamSequence()
	idx := p.Index()
	return IndexState{
		StreamSequence: seq, Keys: idx.Len(), Bytes: idx.Bytes(), Evicted: idx.Evicted(),
		Digest: strconv.FormatUint(idx.Digest(), 16), Applied: p.Stats(), RestoredAt: restoredAt,
	}
}

// debugHandler serves /debug/index beside the ops endpoints.
func debugHandler(ops http.Handler, p *projection.Projector, restoredAt uint64) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ops)
	mux.HandleFunc("GET /debug/index", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(indexState(p, restoredAt))
	})
	return mux
}
